#pragma once

// Gradients of _grouped_mm that autograd (derivatives.yaml) cannot express
// as another _grouped_mm call by itself. The self and mat2 gradients stay in
// FunctionsManual.cpp; this header only adds the bias gradient.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>

namespace at::native {

// Gradient of bias (G, N) given the output gradient `grad`:
//   2d x 3d  grad (sum M, N): per-group sum of grad's rows, computed on the
//            device as ones (1, sum M) @ grad grouped along K, so the offsets
//            are never read on the host (no sync, graph-capturable).
//   2d x 2d, 3d x 3d  grad (G, M, N): grad.sum(1).
// Rows past offs[-1] belong to no group and contribute nothing; empty groups
// give exact zeros. bf16/fp16 gradients accumulate in float32 and the result
// stays float32 (autograd casts it to bias's dtype); float32 and float64
// keep their dtype. The 3d x 2d layout has no bias.
//
// `grouped_mm` runs the 2d x 3d reduction: at::_grouped_mm inside PyTorch;
// the out-of-tree extension passes its own op, since at::_grouped_mm there
// is stock's kernel.
using GroupedMMFn = Tensor (*)(
    const Tensor&, const Tensor&, const std::optional<Tensor>&,
    const std::optional<Tensor>&, std::optional<ScalarType>);

Tensor grouped_mm_bias_backward(
    const Tensor& grad,
    int64_t self_dim,
    int64_t mat2_dim,
    const std::optional<Tensor>& offs,
    GroupedMMFn grouped_mm = nullptr);

}  // namespace at::native
