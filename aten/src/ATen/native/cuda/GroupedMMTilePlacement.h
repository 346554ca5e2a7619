#pragma once

// Which of the two Hopper kernels of a split call (TileConfig::kSplit in
// GroupedMMSm90.h) runs each group. The argument-filling kernel applies it
// on the device, where the group sizes are; it is plain arithmetic, so the
// CPU tests check it too (through a private op of the extension).

#include <c10/macros/Macros.h>

#include <cstdint>
#include <vector>

namespace at::native::grouped_mm::sm90 {

// Tile sizes of the two split kernels (static_asserts in GroupedMMSm90.cuh
// tie them to the configs): both 128 rows; the large kernel's tiles are 256
// columns wide, in clusters of two along M.
constexpr int64_t kRowTile = 128;
constexpr int64_t kMediumTileCols = 128;
constexpr int64_t kLargeTileCols = 256;
constexpr int64_t kLargeClusterRowTiles = 2;

// Rows of the wide tile (TileConfig::kWide; static_assert in
// GroupedMMSm90.cuh).
constexpr int64_t kWideTileRows = 64;

// A row split call (TileConfig::kRowSplit): a group's rows on large_solo
// (its first solo_rows, whole 128-row tiles) and on wide (the wide_rows
// after them, one partial tile). Only a last tile of at most 64 rows goes
// to wide: one of 65-127 rows pads as much in a 128-row tile as in two
// 64-row ones, and large_solo runs it at its better efficiency.
struct RowSplit {
  int64_t solo_rows;
  int64_t wide_rows;
};

C10_HOST_DEVICE constexpr RowSplit split_group_rows(int64_t m) {
  const int64_t last = m > 0 ? m % kRowTile : 0;
  if (last == 0 || last > kWideTileRows) {
    return {m > 0 ? m : 0, 0};
  }
  return {m - last, last};
}

// Odd 128-row tile counts from which a group still takes the large tile by
// default (the padding then costs at most 1/8 of its work; 4 and 16 measured
// the same within noise, results/NOTES.md).
constexpr int64_t kDefaultMinOddTilesForLarge = 8;

// True when a group of m rows prefers the large kernel: its 128-row tile
// count is even (the cluster pads nothing), or at least min_odd_tiles, where
// the padded tile costs less than the large tile's better efficiency gains
// back.
C10_HOST_DEVICE constexpr bool prefers_large_tile(
    int64_t m, int64_t min_odd_tiles) {
  const int64_t tiles = (m + kRowTile - 1) / kRowTile;
  return tiles > 0 &&
      (tiles % kLargeClusterRowTiles == 0 || tiles >= min_odd_tiles);
}

// CTAs the medium kernel spends on an m x n group.
C10_HOST_DEVICE constexpr int64_t medium_tile_ctas(int64_t m, int64_t n) {
  return (m + kRowTile - 1) / kRowTile *
      ((n + kMediumTileCols - 1) / kMediumTileCols);
}

// CTAs the large kernel spends on an m x n group, cluster padding included.
C10_HOST_DEVICE constexpr int64_t large_tile_ctas(int64_t m, int64_t n) {
  const int64_t cluster_rows = kRowTile * kLargeClusterRowTiles;
  return (m + cluster_rows - 1) / cluster_rows * kLargeClusterRowTiles *
      ((n + kLargeTileCols - 1) / kLargeTileCols);
}

// Adds a non-empty m x n group's CTAs to the count of the kernel it
// prefers: the input of split_placement, counted alike by the filling
// kernel and by place_split_groups.
template <typename Count>
C10_HOST_DEVICE inline void count_preferred_ctas(
    int64_t m, int64_t n, int64_t min_odd_tiles, Count& medium,
    Count& large) {
  if (prefers_large_tile(m, min_odd_tiles)) {
    large += large_tile_ctas(m, n);
  } else {
    medium += medium_tile_ctas(m, n);
  }
}

// The whole call's view. A kernel left with less than one wave of CTAs
// (fewer than the SMs it may use) would run alone on part of the GPU,
// serialised with the other: grin_moe skewed put 50 CTAs on the large
// kernel and ran 1.08x slower than on the medium one alone
// (results/NOTES.md). Its groups then go to the other kernel.
enum class SplitPlacement { kBySize, kAllMedium, kAllLarge };

C10_HOST_DEVICE constexpr SplitPlacement split_placement(
    int64_t medium_ctas, int64_t large_ctas, int64_t wave) {
  if (medium_ctas == 0 || large_ctas == 0) {
    return SplitPlacement::kBySize;
  }
  if (large_ctas < wave) {
    return SplitPlacement::kAllMedium;
  }
  return medium_ctas < wave ? SplitPlacement::kAllLarge
                            : SplitPlacement::kBySize;
}

C10_HOST_DEVICE constexpr bool runs_on_large_kernel(
    int64_t m, int64_t min_odd_tiles, SplitPlacement placement) {
  return placement == SplitPlacement::kAllLarge ||
      (placement == SplitPlacement::kBySize &&
       prefers_large_tile(m, min_odd_tiles));
}

// Where a group of a split call runs; kNone: an empty problem (m or n is
// 0), which no kernel runs.
enum class SplitKernel { kNone, kMedium, kLarge };

// The host form of the same placement for a list of group row counts
// with n output columns (the device computes the CTA sums in parallel).
inline std::vector<SplitKernel> place_split_groups(
    const std::vector<int64_t>& group_rows, int64_t n, int64_t wave,
    int64_t min_odd_tiles) {
  int64_t medium = 0;
  int64_t large = 0;
  for (const int64_t m : group_rows) {
    if (m > 0 && n > 0) {
      count_preferred_ctas(m, n, min_odd_tiles, medium, large);
    }
  }
  const SplitPlacement placement = split_placement(medium, large, wave);
  std::vector<SplitKernel> kernels;
  kernels.reserve(group_rows.size());
  for (const int64_t m : group_rows) {
    if (m <= 0 || n <= 0) {
      kernels.push_back(SplitKernel::kNone);
    } else {
      kernels.push_back(runs_on_large_kernel(m, min_odd_tiles, placement)
                            ? SplitKernel::kLarge
                            : SplitKernel::kMedium);
    }
  }
  return kernels;
}

}  // namespace at::native::grouped_mm::sm90
