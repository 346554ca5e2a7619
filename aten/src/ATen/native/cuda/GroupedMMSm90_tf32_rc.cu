// One CUTLASS instantiation per file, so they compile in parallel.
// TF32 WGMMA needs both operands K-major: A row-major, B column-major.
#include <ATen/native/cuda/GroupedMMSm90.cuh>

namespace at::native::grouped_mm::sm90 {
GROUPED_MM_SM90_INSTANTIATE(float, float, true, false)
}  // namespace at::native::grouped_mm::sm90
