// Registers private overlap_ops ops that expose the Hopper split-tile
// placement and the row split (aten/src/ATen/native/cuda/
// GroupedMMTilePlacement.h) to the CPU tests. This file only routes to aten/; the placement lives there.

#include <ATen/native/cuda/GroupedMMTilePlacement.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace overlap_ops {
namespace {

// "medium", "large" or "none" (an empty group, which no kernel runs) per
// group of a row-grouped call with n output columns.
std::vector<std::string> sm90_split_placement(
    std::vector<int64_t> group_rows,
    int64_t n,
    int64_t sm_limit,
    std::optional<int64_t> min_odd_tiles_arg) {
  const int64_t min_odd_tiles = min_odd_tiles_arg.value_or(
      at::native::grouped_mm::sm90::kDefaultMinOddTilesForLarge);
  TORCH_CHECK(n >= 0, "n must be >= 0, got ", n);
  TORCH_CHECK(sm_limit >= 1, "sm_limit must be >= 1, got ", sm_limit);
  TORCH_CHECK(min_odd_tiles >= 1, "min_odd_tiles must be >= 1, got ",
              min_odd_tiles);
  // The kernels take int32 sizes (fits_int32), so the placement never sees
  // more; this also keeps its tile arithmetic far from overflow.
  constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(n <= kMaxSize, "n must be <= ", kMaxSize, ", got ", n);
  for (size_t g = 0; g < group_rows.size(); ++g) {
    TORCH_CHECK(group_rows[g] <= kMaxSize, "group_rows[", g, "] must be <= ",
                kMaxSize, ", got ", group_rows[g]);
  }
  using at::native::grouped_mm::sm90::SplitKernel;
  std::vector<std::string> names;
  for (const SplitKernel kernel :
       at::native::grouped_mm::sm90::place_split_groups(
           group_rows, n, sm_limit, min_odd_tiles)) {
    names.emplace_back(kernel == SplitKernel::kLarge    ? "large"
                       : kernel == SplitKernel::kMedium ? "medium"
                                                        : "none");
  }
  return names;
}

// [rows on large_solo, rows on wide] for a group of m rows of a row split
// call (OVERLAP_OPS_SM90_TILE=row_split).
std::vector<int64_t> sm90_row_split(int64_t m) {
  TORCH_CHECK(m >= 0, "m must be >= 0, got ", m);
  const auto rows = at::native::grouped_mm::sm90::split_group_rows(m);
  return {rows.solo_rows, rows.wide_rows};
}

}  // namespace
}  // namespace overlap_ops

TORCH_LIBRARY_FRAGMENT(overlap_ops, m) {
  m.def("_sm90_split_placement(int[] group_rows, int n, int sm_limit, "
        "int? min_odd_tiles=None) -> str[]",
        &overlap_ops::sm90_split_placement);
  m.def("_sm90_row_split(int m) -> int[]", &overlap_ops::sm90_row_split);
}
