#pragma once

// The bias gradient's CUDA kernel (GroupColumnSums.cu): per-group column
// sums of the output gradient. GroupedMMBackward.h's column_sums hook takes
// it through an operator whose CUDA kernel this is.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <optional>

namespace at::native {

// Column sums of each group of grad's rows, (G, N), in `dtype`: float32
// (float64 for float64 grad) or grad's own. offs given: grad (sum M, N)
// split by the device offsets, clamped like the GEMMs' (bad offsets read
// nothing out of bounds); offs absent: grad (G, M, N). Any strides, no
// host sync, a grid of at most SMs - k blocks under an SM carveout, and a
// fixed order of additions (deterministic). bf16, fp16, fp32, fp64.
Tensor group_column_sums_cuda(
    const Tensor& grad, const std::optional<Tensor>& offs, ScalarType dtype);

}  // namespace at::native
