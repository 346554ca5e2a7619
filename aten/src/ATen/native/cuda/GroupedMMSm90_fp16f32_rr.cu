// One CUTLASS instantiation per file, so they compile in parallel.
#include <ATen/native/cuda/GroupedMMSm90.cuh>

namespace at::native::grouped_mm::sm90 {
GROUPED_MM_SM90_INSTANTIATE(c10::Half, float, true, true)
}  // namespace at::native::grouped_mm::sm90
