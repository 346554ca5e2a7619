#pragma once

// Interface between the host dispatcher (GroupedMMSm90Dispatch.cpp) and the
// CUTLASS instantiations (GroupedMMSm90_*.cu, one per dtype pair and operand
// layout so they compile in parallel).

#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMTileChoice.h>

#include <cstdint>
#include <optional>

namespace at::native::grouped_mm::sm90 {

// Leading dimensions, in elements, of the per-group matrices. They are the
// same for every group: only base pointers and sizes vary.
struct LeadingDims {
  int64_t a;
  int64_t b;
  int64_t d;
};

// One launch's kernel and walk, by the rules of GroupedMMTileChoice.h.
struct TileChoice {
  TileConfig config = TileConfig::kLarge;
  RasterOrder raster = RasterOrder::kAlongM;
  // The 128x256 configs' epilogue subtile width: 64 or 128 columns, or 0
  // for CUTLASS's choice (store_tile_cols_for).
  int store_tile_cols = 0;
  // The chunked tile order's consecutive tiles per CTA (tile_chunk_for);
  // 1 is CUTLASS's order.
  int tile_chunk = 1;
  // Windowed launches (tf32_launch_waves_for): the call's tiles run as
  // several launches of one kernel, each this many turns of every CTA
  // (launch_windows in GroupedMMTileOrder.h), so the CTAs restart in step.
  // 0: one launch.
  int launch_waves = 0;
  // The TF32 direct read's token split: this launch runs only the groups
  // of at most split_rows rows, or with split_past only the larger ones;
  // the fill writes the others as empty problems, which the launch skips.
  // The split_past launch comes second and leaves the output's tail and
  // k = 0 groups to the first launch's fill. 0: every group.
  int64_t split_rows = 0;
  bool split_past = false;
};

// The token tile of the TF32 kernel that reads N-major weights as they are
// (GroupedMMSm90Tf32MnB.cuh): 128 tokens (narrow), 256 (wide), 256 on
// 2-CTA clusters, or a split of the groups between the 128- and 256-token
// kernels, each group's side decided on the device.
enum class MnBTile { kNarrow, kSplit, kWide, kCluster };

// How the Hopper kernels run a call.
struct Plan {
  TileChoice tiles;
  // TF32 with N-major weights read directly; nullopt: the K-major kernels.
  std::optional<MnBTile> mn_b_tile;
  // TF32 grouped along K: the padded copies start each group at a
  // multiple of this many floats (settle_k_padded_operands); 0 otherwise.
  int64_t k_group_pad = 0;
};

// The dispatch rule: the plan for a call, or nullopt where the Hopper
// kernels do not take it (another GPU, dtype or layout, or TF32 calls the
// SM80 kernels run faster). Host-known facts only.
std::optional<Plan> plan_for(const LaunchArgs& args);

// A plan's tiles for a call on `config` (with mn_b_tile, the direct read's
// token tile): store tile, tile order and launch windows by the rules.
TileChoice tile_choice_for(const LaunchArgs& args, TileConfig config,
                           std::optional<MnBTile> mn_b_tile);

// Runs a plan: re-lays out the operands the kernels cannot read as they
// are, then launches. Returns false, having launched nothing, where the
// operands or output are not aligned for TMA; may replace args.a / args.b
// by their copies.
bool run_plan(LaunchArgs& args, const Plan& plan);

// Launches D = A @ B for every group. A is row-major (K contiguous) when
// kARowMajor, else column-major; B is row-major (N contiguous) when
// kBRowMajor, else column-major; D is row-major. Returns nullptr once
// launched, or a message saying what CUTLASS refused or what the unit does
// not build.
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm90(const LaunchArgs& args, const LeadingDims& ld,
                     TileChoice choice);

// TF32, rows grouped, A row-major and B row-major (N contiguous, the
// weights as nn.Linear-style code stores them): runs D^T = B^T A^T with B^T
// read through registers, so B needs no transposing copy
// (GroupedMMSm90Tf32MnB.cuh). D is row-major. The choice's config is
// ignored: 128 weight rows x 256 tokens; x 128 tokens (_narrow); or 256 on
// 2-CTA clusters (_cluster).
const char* run_sm90_tf32_mn_b(const LaunchArgs& args, const LeadingDims& ld,
                               TileChoice choice);
const char* run_sm90_tf32_mn_b_narrow(const LaunchArgs& args,
                                      const LeadingDims& ld,
                                      TileChoice choice);
const char* run_sm90_tf32_mn_b_cluster(const LaunchArgs& args,
                                       const LeadingDims& ld,
                                       TileChoice choice);

}  // namespace at::native::grouped_mm::sm90
