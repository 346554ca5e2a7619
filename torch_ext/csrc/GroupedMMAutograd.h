#pragma once

// The autograd kernels of overlap_ops::grouped_mm and, while routing is on,
// of aten::_grouped_mm: the same formulas (those of derivatives.yaml in the
// patched wheel), each product through its own op.

#include <ATen/core/Tensor.h>

#include <optional>

namespace overlap_ops {

at::Tensor grouped_mm_autograd(
    const at::Tensor& a,
    const at::Tensor& b,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype);

at::Tensor aten_grouped_mm_autograd(
    const at::Tensor& a,
    const at::Tensor& b,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype);

}  // namespace overlap_ops
