#pragma once

// The autograd kernel of overlap_ops::grouped_mm. Routing registers it for
// aten::_grouped_mm too, so a routed call trains with the same formulas as
// the op (and as derivatives.yaml in the patched wheel).

#include <ATen/core/Tensor.h>

#include <optional>

namespace overlap_ops {

at::Tensor grouped_mm_autograd(
    const at::Tensor& a,
    const at::Tensor& b,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype);

}  // namespace overlap_ops
