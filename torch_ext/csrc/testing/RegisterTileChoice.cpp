// Test-only ops (namespace overlap_ops_testing) that expose the CUDA
// kernels' host-side rules to the CPU tests: the Hopper tile choice
// (aten/src/ATen/native/cuda/GroupedMMTileChoice.h), tile order and launch
// windows (GroupedMMTileOrder.h), and the column-sums kernel's loads
// (GroupColumnSumsLoads.h). This file only routes to aten/; the rules live
// there.

#include "TileConfigNames.h"

#include <ATen/native/cuda/GroupColumnSumsLoads.h>
#include <ATen/native/cuda/GroupedMMTileChoice.h>
#include <ATen/native/cuda/GroupedMMTileOrder.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <vector>

namespace overlap_ops::testing {
namespace {

namespace sm90 = at::native::grouped_mm::sm90;

// The config a call runs (tile_config_for).
std::string sm90_tile_config(bool row_grouped, int64_t rows_per_group,
                             bool tf32) {
  TORCH_CHECK(rows_per_group >= 0, "rows_per_group must be >= 0, got ",
              rows_per_group);
  return tile_config_name(
      sm90::tile_config_for({row_grouped, rows_per_group, tf32}));
}

std::string raster_name(sm90::RasterOrder order) {
  return order == sm90::RasterOrder::kAlongM ? "m" : "n";
}

// "m" or "n": which way the Hopper kernels walk a group's output tiles
// first, for a group output of mean_m x mean_n (raster_order_for).
std::string sm90_raster_order(int64_t mean_m, int64_t mean_n) {
  TORCH_CHECK(mean_m >= 0 && mean_n >= 0,
              "mean_m and mean_n must be >= 0, got ", mean_m, ", ", mean_n);
  return raster_name(sm90::raster_order_for(mean_m, mean_n));
}

// "m" or "n": the swapped TF32 kernel's walk (swapped_raster_order_for),
// on its 128-token tiles (narrow) or the others.
std::string sm90_swapped_raster_order(bool narrow_token_tile) {
  return raster_name(sm90::swapped_raster_order_for(narrow_token_tile));
}

// The store tile rules' query: grouped "k" (wgrad), "rows" (fwd, dgrad) or
// "none" (3d x 3d); mean_extent the grouped dimension's extent per group.
sm90::StoreTileQuery store_tile_query(const std::string& config,
                                      bool same_16bit_out,
                                      const std::string& grouped,
                                      int64_t mean_extent) {
  TORCH_CHECK(mean_extent >= 0, "mean_extent must be >= 0, got ",
              mean_extent);
  TORCH_CHECK(grouped == "k" || grouped == "rows" || grouped == "none",
              "grouped must be k, rows or none; got '", grouped, "'");
  return {tile_config_named(config), same_16bit_out, grouped == "k",
          grouped == "rows", mean_extent};
}

// The 128x256 configs' epilogue subtile columns (0: CUTLASS's choice) for
// a call that runs `config` (store_tile_cols_for).
int64_t sm90_store_tile_cols(const std::string& config, bool same_16bit_out,
                             const std::string& grouped,
                             int64_t mean_extent) {
  return sm90::store_tile_cols_for(
      store_tile_query(config, same_16bit_out, grouped, mean_extent));
}

// The chunked tile order's chunk (tile_chunk_for; 1: CUTLASS's order) for
// a call that runs `config` with the rule's store subtile, each group's
// output group_m x group_n.
int64_t sm90_tile_chunk(const std::string& config, bool same_16bit_out,
                        const std::string& grouped, int64_t mean_extent,
                        int64_t group_m, int64_t group_n) {
  TORCH_CHECK(group_m >= 0 && group_n >= 0,
              "group_m and group_n must be >= 0, got ", group_m, ", ",
              group_n);
  const sm90::StoreTileQuery query =
      store_tile_query(config, same_16bit_out, grouped, mean_extent);
  return sm90::tile_chunk_for(query, sm90::store_tile_cols_for(query),
                              group_m, group_n);
}

// The linear tile index a CTA takes at a turn in the chunked tile order
// (chunked_tile_index).
int64_t sm90_chunked_tile_index(int64_t first_cta, int64_t grid_ctas,
                                int64_t cluster_ctas, int64_t chunk,
                                int64_t step) {
  TORCH_CHECK(grid_ctas > 0 && cluster_ctas > 0 &&
                  grid_ctas % cluster_ctas == 0,
              "grid_ctas must be a positive multiple of cluster_ctas, got ",
              grid_ctas, " and ", cluster_ctas);
  TORCH_CHECK(first_cta >= 0 && first_cta < grid_ctas,
              "first_cta must be in [0, grid_ctas), got ", first_cta);
  TORCH_CHECK(chunk >= 1 && step >= 0, "chunk must be >= 1 and step >= 0, "
              "got ", chunk, " and ", step);
  return static_cast<int64_t>(sm90::chunked_tile_index(
      first_cta, grid_ctas, cluster_ctas, chunk, step));
}

// Windowed launches' tile bound and windows (tile_count_bound and
// launch_windows).
int64_t sm90_tile_count_bound(int64_t groups, bool rows_grouped,
                              int64_t extent, int64_t m, int64_t n,
                              int64_t tile_m, int64_t tile_n,
                              int64_t cluster_m, int64_t cluster_n) {
  TORCH_CHECK(groups >= 0 && extent >= 0 && m >= 0 && n >= 0,
              "groups, extent, m and n must be >= 0");
  TORCH_CHECK(tile_m > 0 && tile_n > 0 && cluster_m > 0 && cluster_n > 0,
              "tile and cluster extents must be > 0");
  return static_cast<int64_t>(sm90::tile_count_bound(
      groups, rows_grouped, extent, m, n, tile_m, tile_n, cluster_m,
      cluster_n));
}

std::vector<int64_t> sm90_launch_windows(int64_t tile_bound,
                                         int64_t grid_ctas, int64_t chunk,
                                         int64_t waves,
                                         int64_t max_launches) {
  TORCH_CHECK(tile_bound >= 0, "tile_bound must be >= 0, got ", tile_bound);
  TORCH_CHECK(grid_ctas > 0 && chunk > 0 && waves > 0 && max_launches > 0,
              "grid_ctas, chunk, waves and max_launches must be > 0");
  const auto windows = sm90::launch_windows(tile_bound, grid_ctas, chunk,
                                            waves, max_launches);
  return {static_cast<int64_t>(windows.tiles_per_launch),
          static_cast<int64_t>(windows.launches)};
}

// The windowed launches' waves a TF32 call takes (tf32_launch_waves_for;
// 0: one launch): on the direct read (its token tile narrow, clustered or
// neither) or on a K-major `config`, with rows_per_group rows per group on
// average.
int64_t sm90_tf32_launch_waves(bool direct_read, bool narrow_token_tile,
                               bool cluster_token_tile,
                               const std::string& config,
                               int64_t rows_per_group) {
  return sm90::tf32_launch_waves_for(
      {direct_read, narrow_token_tile, cluster_token_tile,
       tile_config_named(config), rows_per_group});
}

// Whether the bias gradient's column-sums kernel loads 16-byte vectors
// for a grad of this element size, data address and strides (elements).
bool column_sums_vector_loads(int64_t element_size, int64_t data_address,
                              int64_t n, int64_t row_stride,
                              int64_t col_stride, int64_t group_stride) {
  TORCH_CHECK(data_address >= 0 && n >= 0 && row_stride >= 0 &&
                  col_stride >= 0 && group_stride >= 0,
              "data_address, n and the strides must be >= 0");
  return at::native::column_sums_vector_loads(
      element_size, static_cast<uint64_t>(data_address), n, row_stride,
      col_stride, group_stride);
}

}  // namespace
}  // namespace overlap_ops::testing

TORCH_LIBRARY_FRAGMENT(overlap_ops_testing, m) {
  namespace t = overlap_ops::testing;
  m.def("sm90_tile_config(bool row_grouped, int rows_per_group, bool tf32) "
        "-> str",
        &t::sm90_tile_config);
  m.def("sm90_raster_order(int mean_m, int mean_n) -> str",
        &t::sm90_raster_order);
  m.def("sm90_swapped_raster_order(bool narrow_token_tile) -> str",
        &t::sm90_swapped_raster_order);
  m.def("sm90_store_tile_cols(str config, bool same_16bit_out, "
        "str grouped, int mean_extent) -> int",
        &t::sm90_store_tile_cols);
  m.def("sm90_tile_chunk(str config, bool same_16bit_out, str grouped, "
        "int mean_extent, int group_m, int group_n) -> int",
        &t::sm90_tile_chunk);
  m.def("sm90_chunked_tile_index(int first_cta, int grid_ctas, "
        "int cluster_ctas, int chunk, int step) -> int",
        &t::sm90_chunked_tile_index);
  m.def("sm90_tile_count_bound(int groups, bool rows_grouped, int extent, "
        "int m, int n, int tile_m, int tile_n, int cluster_m, int cluster_n) "
        "-> int",
        &t::sm90_tile_count_bound);
  m.def("sm90_launch_windows(int tile_bound, int grid_ctas, int chunk, "
        "int waves, int max_launches) -> int[]",
        &t::sm90_launch_windows);
  m.def("sm90_tf32_launch_waves(bool direct_read, bool narrow_token_tile, "
        "bool cluster_token_tile, str config, int rows_per_group) -> int",
        &t::sm90_tf32_launch_waves);
  m.def("column_sums_vector_loads(int element_size, int data_address, "
        "int n, int row_stride, int col_stride, int group_stride) -> bool",
        &t::column_sums_vector_loads);
}
