#pragma once

// The gradient cast of _grouped_mm's backward on CUDA.

#include <ATen/core/Tensor.h>

namespace at::native {

// grad.to(dtype) for the backward of a _grouped_mm that returned float32
// from bf16/fp16 inputs (out_dtype=float32): the backward's grouped GEMMs
// take grad in the inputs' dtype. One copy kernel whose grid stays within
// the SM carveout; torch's cast sizes its grid by the element count and so
// takes every SM. The result is a new contiguous tensor (a copy when grad
// already has that dtype, so the op never aliases its input).
Tensor grouped_mm_grad_to_cuda(const Tensor& grad, ScalarType dtype);

}  // namespace at::native
