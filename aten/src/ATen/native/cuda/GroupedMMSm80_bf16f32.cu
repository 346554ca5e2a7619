// One dtype pair per file, so the instantiations compile in parallel; each
// holds the three operand majors x two access widths.
#include <ATen/native/cuda/GroupedMMSm80.cuh>

namespace at::native::grouped_mm::sm80 {
GROUPED_MM_SM80_INSTANTIATE_MAJORS(c10::BFloat16, float)
}  // namespace at::native::grouped_mm::sm80
