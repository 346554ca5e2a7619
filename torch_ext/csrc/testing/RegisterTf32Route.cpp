// Test-only ops (namespace overlap_ops_testing) that expose the Hopper TF32
// route (aten/src/ATen/native/cuda/GroupedMMTf32Route.h), the direct read's
// token tile rules (there and in GroupedMMTileChoice.h) and the padded K
// layout of its 2d x 2d copies (GroupedMMPaddedK.h) to the CPU tests. This
// file only routes to aten/; the rules live there.

#include <ATen/native/cuda/GroupedMMPaddedK.h>
#include <ATen/native/cuda/GroupedMMTf32Route.h>
#include <ATen/native/cuda/GroupedMMTileChoice.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <vector>

namespace overlap_ops::testing {
namespace {

// The rows-per-group rules' arguments: a call's total rows and its groups.
void check_rows_and_groups(int64_t rows, int64_t groups) {
  TORCH_CHECK(rows >= 0, "rows must be >= 0, got ", rows);
  TORCH_CHECK(groups >= 1, "groups must be >= 1, got ", groups);
}

// "sm90" or "sm80": the kernels a float32 call with TF32 allowed runs on
// Hopper, for m x k x n summed over `groups` groups.
std::string hopper_tf32_family(
    bool grouped_along_k,
    int64_t m,
    int64_t k,
    int64_t n,
    int64_t groups,
    bool transpose_a,
    bool transpose_b) {
  TORCH_CHECK(m >= 0 && k >= 0 && n >= 0,
              "m, k and n must be >= 0, got ", m, ", ", k, ", ", n);
  TORCH_CHECK(groups >= 1, "groups must be >= 1, got ", groups);
  using at::native::grouped_mm::Tf32Family;
  const at::native::grouped_mm::Tf32Work work{
      grouped_along_k, m, k, n, groups, transpose_a, transpose_b};
  return at::native::grouped_mm::hopper_tf32_family(work) == Tf32Family::kSm90
      ? "sm90"
      : "sm80";
}

// Whether a row-grouped call with row-major weights runs the swapped
// Hopper kernel that reads them as they are, for `rows` rows
// in `groups` groups and A of the given major.
bool tf32_mn_b_direct_wins(int64_t rows, int64_t groups, bool a_row_major) {
  check_rows_and_groups(rows, groups);
  return at::native::grouped_mm::tf32_mn_b_direct_wins(rows, groups,
                                                       a_row_major);
}

// Whether the swapped kernel runs its 128-token tile (else 256 tokens).
bool tf32_mn_b_narrow_wins(int64_t rows, int64_t groups) {
  check_rows_and_groups(rows, groups);
  return at::native::grouped_mm::tf32_mn_b_narrow_wins(rows, groups);
}

// Whether the call splits its groups between the 128- and 256-token
// kernels on the device (tf32_mn_b_token_split_wins).
bool tf32_mn_b_token_split_wins(int64_t rows, int64_t groups) {
  check_rows_and_groups(rows, groups);
  return at::native::grouped_mm::tf32_mn_b_token_split_wins(rows, groups);
}

// Whether its 256-token tiles run on 2-CTA clusters
// (tf32_mn_b_cluster_wins) on a device of this peak DRAM bandwidth.
bool sm90_tf32_mn_b_cluster(int64_t rows, int64_t groups,
                            double dram_bytes_per_second) {
  check_rows_and_groups(rows, groups);
  TORCH_CHECK(dram_bytes_per_second > 0,
              "dram_bytes_per_second must be > 0, got ",
              dram_bytes_per_second);
  return at::native::grouped_mm::sm90::tf32_mn_b_cluster_wins(
      rows, groups, dram_bytes_per_second);
}

// How many floats the padded copies align each group's start to, for
// `tokens` grouped along K in `groups` groups (tf32_k_group_pad).
int64_t tf32_k_group_pad(int64_t tokens, int64_t groups) {
  check_rows_and_groups(tokens, groups);
  return at::native::grouped_mm::tf32_k_group_pad(tokens, groups);
}

// Each group's first K index in the padded copies, then their K width,
// for groups of these sizes (in order, as the offsets give them).
std::vector<int64_t> tf32_padded_k_layout(
    const std::vector<int64_t>& sizes, int64_t pad) {
  TORCH_CHECK(pad >= 1, "pad must be >= 1, got ", pad);
  std::vector<int64_t> layout;
  int64_t start = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    TORCH_CHECK(sizes[g] >= 0, "sizes[", g, "] must be >= 0, got ",
                sizes[g]);
    layout.push_back(at::native::grouped_mm::padded_k_start(
        start, static_cast<int64_t>(g), pad));
    start += sizes[g];
  }
  layout.push_back(at::native::grouped_mm::padded_k_extent(
      start, static_cast<int64_t>(sizes.size()), pad));
  return layout;
}

}  // namespace
}  // namespace overlap_ops::testing

TORCH_LIBRARY_FRAGMENT(overlap_ops_testing, m) {
  namespace t = overlap_ops::testing;
  m.def("hopper_tf32_family(bool grouped_along_k, int m, int k, int n, "
        "int groups, bool transpose_a, bool transpose_b) -> str",
        &t::hopper_tf32_family);
  m.def("tf32_mn_b_direct_wins(int rows, int groups, "
        "bool a_row_major=True) -> bool",
        &t::tf32_mn_b_direct_wins);
  m.def("tf32_mn_b_narrow_wins(int rows, int groups) -> bool",
        &t::tf32_mn_b_narrow_wins);
  m.def("tf32_mn_b_token_split_wins(int rows, int groups) -> bool",
        &t::tf32_mn_b_token_split_wins);
  m.def("sm90_tf32_mn_b_cluster(int rows, int groups, "
        "float dram_bytes_per_second) -> bool",
        &t::sm90_tf32_mn_b_cluster);
  m.def("tf32_k_group_pad(int tokens, int groups) -> int",
        &t::tf32_k_group_pad);
  m.def("tf32_padded_k_layout(int[] sizes, int pad) -> int[]",
        &t::tf32_padded_k_layout);
}
