// Registers a private overlap_ops op that exposes the Hopper TF32 route
// (aten/src/ATen/native/cuda/GroupedMMTf32Route.h) to the CPU tests. This
// file only routes to aten/; the rule lives there.

#include <ATen/native/cuda/GroupedMMTf32Route.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>
#include <string>

namespace overlap_ops {
namespace {

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

}  // namespace
}  // namespace overlap_ops

TORCH_LIBRARY_FRAGMENT(overlap_ops, m) {
  m.def("_hopper_tf32_family(bool grouped_along_k, int m, int k, int n, "
        "int groups, bool transpose_a, bool transpose_b) -> str",
        &overlap_ops::hopper_tf32_family);
}
