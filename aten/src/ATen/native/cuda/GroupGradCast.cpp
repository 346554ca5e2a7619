// The gradient cast of _grouped_mm's backward: host checks, then the
// relayout kernels' bounded copy. Built for ROCm too (hipified), as the op's
// CUDA dispatch key serves ROCm as well.

#include <ATen/native/cuda/GroupGradCast.h>

#include <ATen/Functions.h>
#include <ATen/cuda/SMCarveoutCUDA.h>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <c10/cuda/CUDAGuard.h>

namespace at::native {

Tensor grouped_mm_grad_to_cuda(const Tensor& grad, ScalarType dtype) {
  TORCH_CHECK(
      grad.is_cuda(), "grouped_mm_grad_to: grad must be a CUDA tensor, got ",
      grad.device());
  TORCH_CHECK(
      grad.dim() == 2 || grad.dim() == 3,
      "grouped_mm_grad_to: grad must be 2-D or 3-D, got ", grad.dim(), "-D");
  const ScalarType from = grad.scalar_type();
  TORCH_CHECK(
      (from == kFloat && (dtype == kBFloat16 || dtype == kHalf)) ||
          (from == dtype &&
           (from == kFloat || from == kBFloat16 || from == kHalf)),
      "grouped_mm_grad_to: casts float32 to bfloat16 or float16 (or copies "
      "one of the three), got ", from, " to ", dtype);
  c10::cuda::CUDAGuard guard(grad.device());
  Tensor out = at::empty(grad.sizes(), grad.options().dtype(dtype));
  grouped_mm::copy_within_sm_limit(
      grad, out, at::cuda::current_device_sm_limit());
  return out;
}

}  // namespace at::native
