#pragma once

// CUDA entry point of _grouped_mm: validates on the host, then runs entirely
// on the device (offsets are never copied to the host unless checked mode is
// on).

#include <ATen/core/Tensor.h>

#include <optional>

namespace at::native {

Tensor grouped_mm_cuda(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype);

// grad.to(dtype) for the backward of a _grouped_mm that returned float32
// from bf16/fp16 inputs (out_dtype=float32): the backward's grouped GEMMs
// take grad in the inputs' dtype. One copy kernel whose grid stays within
// the SM carveout; torch's cast sizes its grid by the element count and so
// takes every SM. The result is a new contiguous tensor (a copy when grad
// already has that dtype, so the op never aliases its input).
Tensor grouped_mm_grad_to_cuda(const Tensor& grad, ScalarType dtype);

}  // namespace at::native
