#pragma once

// The order in which a persistent CTA takes the output tiles of a grouped
// call (tile_chunk_for in GroupedMMTileChoice.h picks the chunk;
// OVERLAP_OPS_SM90_TILE_CHUNK pins it). Plain arithmetic, so the CPU tests
// check it through a private op of the extension; the Hopper tile
// scheduler (GroupedMMSm90TileScheduler.cuh) applies it on the device.
//
// CUTLASS's group scheduler gives the CTA at linear index `first` the
// tiles first, first + P, first + 2P, ... of all groups' tiles laid end to
// end (P CTAs in the grid). When a group has fewer tiles than P, every
// step lands in another group, and each change of group rewrites the
// TMA descriptors of A, B and D before the tile can start: about 0.9 us a
// switch on qwen3_decode's wgrad (results/tiles/2026-12-02-group-switch).
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

}  // namespace at::native::grouped_mm::sm90
