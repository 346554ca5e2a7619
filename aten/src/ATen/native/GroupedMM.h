#pragma once

// Entry points of _grouped_mm per backend. The contract (layouts, offsets,
// bias, out_dtype, zeroed tail) is documented in DESIGN.md and checked by
// check_grouped_mm_inputs in GroupedMMValidation.h.

#include <ATen/core/Tensor.h>

#include <optional>

namespace at::native {

// Reference implementation: loops over groups with at::mm in float32.
Tensor grouped_mm_cpu(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype);

}  // namespace at::native
