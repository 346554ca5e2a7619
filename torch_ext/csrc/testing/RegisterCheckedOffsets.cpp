// Test-only op (namespace overlap_ops_testing): whether checked offsets are
// on, i.e. what the kernels read (the override set through
// overlap_ops.set_checked_offsets, else TORCH_GROUPED_MM_CHECK_OFFSETS).

#include <ATen/native/GroupedMMValidation.h>

#include <torch/library.h>

namespace overlap_ops::testing {
namespace {

bool checked_offsets() {
  return at::native::grouped_mm_checked_offsets();
}

}  // namespace
}  // namespace overlap_ops::testing

TORCH_LIBRARY_FRAGMENT(overlap_ops_testing, m) {
  m.def("checked_offsets() -> bool", &overlap_ops::testing::checked_offsets);
}
