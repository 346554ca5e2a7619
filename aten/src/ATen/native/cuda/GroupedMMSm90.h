#pragma once

// Interface between the host dispatcher (GroupedMMSm90Dispatch.cpp) and the
// CUTLASS instantiations (GroupedMMSm90_*.cu, one per dtype pair and operand
// layout so they compile in parallel).

#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMTilePlacement.h>

namespace at::native::grouped_mm::sm90 {

// Leading dimensions, in elements, of the per-group matrices. They are the
// same for every group: only base pointers and sizes vary.
struct LeadingDims {
  int64_t a;
  int64_t b;
  int64_t d;
};

// kLarge: 128x256 cooperative tiles, 2-CTA clusters along M (many rows per
// group; the cluster shares each weight tile between two M tiles).
// kMedium: 128x128 pingpong tiles, no cluster: one M tile per group of up to
// 128 rows, so its weights are streamed once without an idle cluster CTA.
// kSmall: 64x128 pingpong tiles (decode-sized groups).
// kSplit (row-grouped calls only): medium and large in one call. The fill
// kernel, which reads every group size, gives each group to one of the two
// kernels (the other sees it as an m = 0 problem); two launches. A group
// goes to the large kernel when prefers_large_tile says so: the large
// kernel's 2-CTA clusters pad a group to an even number of 128-row tiles,
// so a group with an odd count t pays a whole idle tile, 1/t of its work
// (gpt_oss_120b_w13 sparse, 341-row groups: large 1.18x medium, results/
// NOTES.md). If either kernel would get less than one wave of CTAs, all
// groups go to the other (split_placement). The best config depends on the
// group sizes, which the host cannot see without a sync.
// kLargeSolo (the default for 16-bit row-grouped calls past decode sizes):
// kLarge's tiles without the cluster, so no group is padded to an even
// number of 128-row tiles, at the cost of each CTA loading its own weight
// tile (no multicast). One kernel for every group, no split. It beat the
// split on all 12 bf16 fwd rows measured (0.91 vs 0.98 of stock in
// geometric mean, results/tiles/2026-11-30j); kSplit stays TF32's default
// (large_solo was slower there) and is opt-in for 16-bit.
// kWide (an experiment, 16-bit only, OVERLAP_OPS_SM90_TILE=wide; float32
// calls keep the heuristic): 64x256
// pingpong tiles without clusters, for skewed groups whose last 128-row
// tile is mostly padding (results/NOTES.md).
enum class TileConfig { kLarge, kMedium, kSmall, kSplit, kLargeSolo, kWide };

// kLean: CUTLASS's host-side initialisation after the filling kernel's
// launch, and its shared-memory attribute set once per kernel and device.
// kClassic: initialise every kernel on every call, before the fill (the
// previous behaviour, but for the single allocation;
// OVERLAP_OPS_SM90_HOST_PATH=classic, for A/B runs).
enum class HostPath { kLean, kClassic };

struct TileChoice {
  TileConfig config = TileConfig::kLarge;
  int64_t min_odd_tiles = 0;  // kSplit only: see prefers_large_tile
  HostPath host_path = HostPath::kLean;
  // The bias added by the GEMM's epilogue (default), or by the finishing
  // kernel afterwards (OVERLAP_OPS_SM90_BIAS=kernel, for A/B runs).
  bool bias_in_epilogue = true;
  // TF32 only: half the configs' K extent, so a stage holds as many bytes
  // as a 16-bit one (OVERLAP_OPS_SM90_TF32_K_TILE=short; see HalfK in
  // GroupedMMSm90.cuh).
  bool tf32_short_k = false;
};

// Launches D = A @ B for every group. A is row-major (K contiguous) when
// kARowMajor, else column-major; B is row-major (N contiguous) when
// kBRowMajor, else column-major; D is row-major. Returns nullptr once
// launched, or a message saying what CUTLASS refused.
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm90(const LaunchArgs& args, const LeadingDims& ld,
                     TileChoice choice);

}  // namespace at::native::grouped_mm::sm90
