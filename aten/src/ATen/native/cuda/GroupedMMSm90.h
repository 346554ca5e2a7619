#pragma once

// Interface between the host dispatcher (GroupedMMSm90Dispatch.cpp) and the
// CUTLASS instantiations (GroupedMMSm90_*.cu, one per dtype pair and operand
// layout so they compile in parallel).

#include <ATen/native/cuda/GroupedMMKernels.h>

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
// groups go to the other (Sm90ArgumentWriter::prepare). The best config
// depends on the group sizes, which the host cannot see without a sync.
enum class TileConfig { kLarge, kMedium, kSmall, kSplit };

// Tile sizes of the two split kernels (GroupedMMSm90.cuh): both 128 rows;
// the large kernel's tiles are 256 columns wide, in clusters of two along M.
constexpr int64_t kRowTile = 128;
constexpr int64_t kMediumTileCols = 128;
constexpr int64_t kLargeTileCols = 256;
constexpr int64_t kLargeClusterRowTiles = 2;

// True when a group of m rows should run on the large kernel of a kSplit
// call: its 128-row tile count is even (no padding), or at least
// min_odd_tiles, where the padded tile costs less than the large tile's
// better efficiency gains back.
__host__ __device__ constexpr bool prefers_large_tile(
    int64_t m, int64_t min_odd_tiles) {
  const int64_t tiles = (m + kRowTile - 1) / kRowTile;
  return tiles > 0 &&
      (tiles % kLargeClusterRowTiles == 0 || tiles >= min_odd_tiles);
}

struct TileChoice {
  TileConfig config = TileConfig::kLarge;
  int64_t min_odd_tiles = 0;  // kSplit only: see prefers_large_tile
};

// Launches D = A @ B for every group. A is row-major (K contiguous) when
// kARowMajor, else column-major; B is row-major (N contiguous) when
// kBRowMajor, else column-major; D is row-major. Returns nullptr once
// launched, or a message saying what CUTLASS refused.
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm90(const LaunchArgs& args, const LeadingDims& ld,
                     TileChoice choice);

}  // namespace at::native::grouped_mm::sm90
