#pragma once

// Interface between the host dispatcher (GroupedMMSm90Dispatch.cpp) and the
// CUTLASS instantiations (GroupedMMSm90_*.cu, one per dtype pair and operand
// layout so they compile in parallel).

#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMTileChoice.h>

namespace at::native::grouped_mm::sm90 {

// Leading dimensions, in elements, of the per-group matrices. They are the
// same for every group: only base pointers and sizes vary.
struct LeadingDims {
  int64_t a;
  int64_t b;
  int64_t d;
};

// TileConfig: GroupedMMTileChoice.h.

// kDirect (the default): CUTLASS's host-side initialisation after the
// filling kernel's launch, and the kernels with a cluster (the large and
// small configs) launched without CUTLASS's per-launch
// cudaFuncSetAttribute (launch_gemm in GroupedMMSm90.cuh); 2-5% less time
// per call on host-bound decode rows on the H200 (results/NOTES.md).
// kLean: the same, but every kernel launched by CUTLASS's run()
// (OVERLAP_OPS_SM90_HOST_PATH=lean, for A/B runs).
// kClassic: every kernel initialised on every call, before the fill
// (OVERLAP_OPS_SM90_HOST_PATH=classic, for A/B runs).
enum class HostPath { kDirect, kLean, kClassic };

struct TileChoice {
  TileConfig config = TileConfig::kLarge;
  HostPath host_path = HostPath::kDirect;
  // The bias added by the GEMM's epilogue (default), or by the finishing
  // kernel afterwards (OVERLAP_OPS_SM90_BIAS=kernel, for A/B runs).
  bool bias_in_epilogue = true;
  // TF32 only: half the configs' K extent, so a stage holds as many bytes
  // as a 16-bit one (see HalfK in GroupedMMSm90.cuh). The default: it beat
  // the full K extent on all 24 rows of the H200 A/B (results/tf32/
  // 2026-11-30k-shortk); OVERLAP_OPS_SM90_TF32_K_TILE=long turns it off.
  bool tf32_short_k = true;
  // raster_order_for (GroupedMMTileChoice.h), or pinned by
  // OVERLAP_OPS_SM90_RASTER=m|n for A/B runs.
  RasterOrder raster = RasterOrder::kAlongM;
  // An experiment, off by default: log2 of the tile-order swizzle
  // (OVERLAP_OPS_SM90_SWIZZLE=1|2|4|8). Consecutive CTAs then take
  // 2^log_swizzle tiles across the raster (along N when M is walked
  // first) before stepping along it, so a wave covers a block of both
  // extents and rereads less of each operand. CUTLASS's group scheduler
  // computes no swizzle without host-side problem shapes, and rounds each
  // group's tile counts along both extents up to a multiple of it: the
  // extra tiles lie wholly outside the group (loads zero-filled, stores
  // clipped, bias reads predicated off), which is wasted work on groups
  // of few tiles (a one-tile group runs 64 at 8).
  int log_swizzle = 0;
  // The 128x256 configs' epilogue subtile width: 64 or 128 columns
  // (store_tile_cols_for in GroupedMMTileChoice.h, or pinned by
  // OVERLAP_OPS_SM90_STORE_TILE=cutlass|64|128); 0: CUTLASS's choice, 32
  // columns for 16-bit output. See StoreTileConfig and kBuildsStoreTiles
  // in GroupedMMSm90.cuh: built for the large config in 16-bit wgrad's
  // units (the default widens calls grouped along K, which run it past
  // 128 rows per group) and for large_solo in the 16-bit units with
  // row-major A (fwd and dgrad; the default widens row-grouped calls that
  // run it to 64 columns). Under a
  // pinned 64 or 128, calls that reach either config in other units
  // raise; calls on other configs ignore it.
  int store_tile_cols = 0;
  // The chunked tile order of GroupedMMTileOrder.h, each CTA taking this
  // many consecutive tiles; 1 is CUTLASS's order. tile_chunk_for picks 4
  // for 16-bit wgrad with few tokens per group; OVERLAP_OPS_SM90_TILE_CHUNK
  // =off|2|4|8|16 pins it. Built for the large config in 16-bit wgrad's
  // units, with its store tiles; calls that reach another config or unit
  // raise while one is pinned.
  int tile_chunk = 1;
  // An experiment, off by default (OVERLAP_OPS_SM90_SCHEDULER=dynamic):
  // CTAs take their later tiles from a global counter as they finish, so
  // they cannot drift apart over a long call (ChunkedGroupTileScheduler).
  // Built for large_solo with 64-column store tiles (16-bit fwd and dgrad
  // with the output in the input dtype); other calls raise while it is
  // set.
  bool dynamic_tiles = false;
  // OVERLAP_OPS_SM90_LAUNCH_WAVES=off|2|4|8|16 (off by default for 16-bit
  // calls, an experiment there; 8 for TF32 where built,
  // tf32_launch_waves_for): the call's tiles run as several launches of
  // the same kernel, each this
  // many turns of every CTA (launch_windows, GroupedMMTileOrder.h), so the
  // CTAs restart in step at every launch instead of drifting apart over
  // the whole call. 0: one launch. Uses the kernels built for the chunked
  // order and the dynamic walk (large with wider store tiles for wgrad,
  // large_solo with 64-column store tiles for fwd and dgrad), and for TF32
  // chunked-shape builds of the direct read's 256-token kernel and of
  // K-major large_solo with the short K tile; other calls raise while it
  // is set.
  int launch_waves = 0;
  // The TF32 direct read's token split (tf32_mn_b_token_split_wins,
  // GroupedMMTf32Route.h): this launch runs only the groups of at most
  // split_rows rows, or with split_past only the larger ones; the fill
  // writes the others as empty problems, so the launch skips them. The
  // split_past launch comes second and leaves the output's tail and k = 0
  // groups to the first launch's fill. 0: every group.
  int64_t split_rows = 0;
  bool split_past = false;
};

// Launches D = A @ B for every group. A is row-major (K contiguous) when
// kARowMajor, else column-major; B is row-major (N contiguous) when
// kBRowMajor, else column-major; D is row-major. Returns nullptr once
// launched, or a message saying what CUTLASS refused.
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm90(const LaunchArgs& args, const LeadingDims& ld,
                     TileChoice choice);

// TF32, rows grouped, A row-major and B row-major (N contiguous, the
// weights as nn.Linear-style code stores them): runs D^T = B^T A^T with B^T
// read through registers, so B needs no transposing copy
// (GroupedMMSm90Tf32MnB.cuh; the route: GroupedMMTf32Route.h). D is
// row-major. The tile choice's config is ignored: 128 weight rows x 256
// tokens; x 128 tokens (_narrow, the default for small groups); or 256 on
// 2-CTA clusters (_cluster, the default from 1024 to 2047 rows per group).
// A token split runs _narrow, then the 256-token kernel, each with its
// side of TileChoice::split_rows.
const char* run_sm90_tf32_mn_b(const LaunchArgs& args, const LeadingDims& ld,
                               TileChoice choice);
const char* run_sm90_tf32_mn_b_narrow(const LaunchArgs& args,
                                      const LeadingDims& ld,
                                      TileChoice choice);
const char* run_sm90_tf32_mn_b_cluster(const LaunchArgs& args,
                                       const LeadingDims& ld,
                                       TileChoice choice);

}  // namespace at::native::grouped_mm::sm90
