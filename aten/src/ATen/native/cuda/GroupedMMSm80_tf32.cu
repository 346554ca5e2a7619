// One dtype pair per file, so the instantiations compile in parallel; each
// holds the three operand majors x two access widths.
// float operands run as TF32 (only dispatched when TF32 is allowed).
#include <ATen/native/cuda/GroupedMMSm80.cuh>

namespace at::native::grouped_mm::sm80 {
GROUPED_MM_SM80_INSTANTIATE_MAJORS(float, float)
}  // namespace at::native::grouped_mm::sm80
