#pragma once

// The order in which a persistent CTA takes the output tiles of a grouped
// call (tile_chunk_for in GroupedMMTileChoice.h picks the chunk), and the
// windows of windowed launches. Plain arithmetic, so it is testable on the
// CPU; the Hopper tile scheduler (GroupedMMSm90TileScheduler.cuh) applies
// it on the device.
//
// CUTLASS's group scheduler gives the CTA at linear index `first` the
// tiles first, first + P, first + 2P, ... of all groups' tiles laid end to
// end (P CTAs in the grid). When a group has fewer tiles than P, every
// step lands in another group, and each change of group rewrites the
// TMA descriptors of A, B and D before the tile can start.
// The chunked order keeps the same tiles but hands each CTA `chunk`
// consecutive ones at a time: super-block s holds P * chunk tiles, and the
// CTA takes its own `chunk` of them. The CTAs of one cluster keep adjacent
// indices (a cluster shares one cluster-level index; its CTAs differ in
// the offset within it), so the remap works on cluster indices.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace at::native::grouped_mm::sm90 {

// The linear tile index a CTA takes at its `step`-th turn (0, 1, ...):
// first_cta in [0, grid_ctas), grid_ctas a multiple of cluster_ctas,
// chunk >= 1. chunk = 1 is CUTLASS's order (first_cta + step * grid_ctas).
// For every chunk the map from (CTA, step) to index is a bijection onto
// the naturals and increases with step, as the group scheduler's forward
// scan over the groups needs.
C10_HOST_DEVICE constexpr uint64_t chunked_tile_index(
    uint64_t first_cta, uint64_t grid_ctas, uint64_t cluster_ctas,
    uint64_t chunk, uint64_t step) {
  const uint64_t clusters = grid_ctas / cluster_ctas;
  const uint64_t cluster = first_cta / cluster_ctas;
  const uint64_t offset = first_cta % cluster_ctas;
  const uint64_t block = step / chunk;  // super-block of clusters * chunk
  const uint64_t within = step % chunk;
  const uint64_t cluster_index =
      block * clusters * chunk + cluster * chunk + within;
  return cluster_index * cluster_ctas + offset;
}

// Windowed launches (TileChoice::launch_waves): the call's tiles split
// into consecutive windows of the linear index, one launch of the same
// kernel per window, so every launch starts its CTAs in step. Why: in one
// persistent launch the CTAs drift apart over tens of waves, tiles that
// share an operand panel read it at different times, and the L2 has lost
// it by the second read; at the power limit those DRAM bytes cost clock.
//
// An upper bound on a call's output tiles from what the host knows: each
// group's count along the grouped rows is rounded up to whole tiles and to
// the cluster, so a rows-grouped call has at most ceil(extent / tile_m) +
// groups * cluster_m tile rows; other calls have `groups` groups of
// (m, n). A wrong bound costs time only: the last window is open-ended.
C10_HOST_DEVICE constexpr uint64_t tile_count_bound(
    uint64_t groups, bool rows_grouped, uint64_t extent, uint64_t m,
    uint64_t n, uint64_t tile_m, uint64_t tile_n, uint64_t cluster_m,
    uint64_t cluster_n) {
  const uint64_t tile_rows = rows_grouped
      ? (extent + tile_m - 1) / tile_m + groups * cluster_m
      : groups * (((m + tile_m - 1) / tile_m + cluster_m - 1) / cluster_m *
                  cluster_m);
  const uint64_t tile_cols =
      ((n + tile_n - 1) / tile_n + cluster_n - 1) / cluster_n * cluster_n;
  return tile_rows * tile_cols;
}

// Tiles per launch and the number of launches for `tile_bound` tiles,
// `waves` turns of every CTA per launch (each turn `chunk` tiles in the
// chunked order, so a window holds whole super-blocks), at most
// max_launches launches (more waves per launch past that, so a loose
// bound on a many-group call does not launch hundreds of empty kernels).
// At least one launch.
struct LaunchWindows {
  uint64_t tiles_per_launch;
  uint64_t launches;
};

C10_HOST_DEVICE constexpr LaunchWindows launch_windows(
    uint64_t tile_bound, uint64_t grid_ctas, uint64_t chunk, uint64_t waves,
    uint64_t max_launches) {
  const uint64_t per_wave = grid_ctas * chunk;
  uint64_t per_launch = per_wave * waves;
  uint64_t launches = (tile_bound + per_launch - 1) / per_launch;
  if (launches > max_launches) {
    const uint64_t waves_needed =
        (tile_bound + per_wave * max_launches - 1) / (per_wave * max_launches);
    per_launch = per_wave * waves_needed;
    launches = (tile_bound + per_launch - 1) / per_launch;
  }
  return {per_launch, launches > 0 ? launches : 1};
}

}  // namespace at::native::grouped_mm::sm90
