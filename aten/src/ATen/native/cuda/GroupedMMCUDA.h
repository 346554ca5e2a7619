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

// Whether upstream's _grouped_mm_cuda keeps this call for one of its own
// sync-free paths (GroupedMMDispatchRule.h); if not, grouped_mm_cuda runs
// it. Decided from the tensors' metadata, the GPU and the torch build, with
// _grouped_mm_cuda's arguments: it asks this before anything else.
bool grouped_mm_upstream_takes(
    const Tensor& self,
    const Tensor& mat2,
    const std::optional<Tensor>& offs,
    const std::optional<Tensor>& bias,
    std::optional<ScalarType> out_dtype);

}  // namespace at::native
