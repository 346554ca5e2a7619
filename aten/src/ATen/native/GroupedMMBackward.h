#pragma once

// Gradients of _grouped_mm that autograd (derivatives.yaml) cannot express
// as another _grouped_mm call by itself: self and mat2 (after an
// out_dtype=float32 forward the output gradient must first be cast to the
// inputs' dtype) and bias. One implementation for PyTorch's generated
// autograd and for the out-of-tree extension's C++ autograd Function.

#include <ATen/TensorGeometry.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>

namespace at::native {

// Gradient of bias (G, N) given the output gradient `grad`:
//   2d x 3d  grad (sum M, N): per-group sum of grad's rows, the offsets read
//            on the device only (no sync, graph-capturable).
//   2d x 2d, 3d x 3d  grad (G, M, N): grad.sum(1).
// Rows past offs[-1] belong to no group and contribute nothing; empty groups
// give exact zeros. bf16/fp16 gradients accumulate in float32 and the result
// is float32 unless `out_dtype` asks for grad's dtype; float32 and float64
// keep their dtype. The 3d x 2d layout has no bias.
//
// `column_sums`, when given, computes both on CUDA for floating grads in one
// kernel whose grid stays within the SM carveout and whose float32 sums are
// exact with TF32 allowed: a caller that traces (torch.compile) passes a
// dispatcher op, whose fake kernel it sees; group_column_sums_cuda
// (cuda/GroupColumnSums.h) is that op's CUDA kernel. Otherwise
// `grouped_mm` runs the 2d x 3d reduction as ones (1, sum M) @ grad
// grouped along K: at::_grouped_mm inside PyTorch;
// the out-of-tree extension passes its own op, since at::_grouped_mm there
// is stock's kernel.
using GroupedMMFn = Tensor (*)(
    const Tensor&, const Tensor&, const std::optional<Tensor>&,
    const std::optional<Tensor>&, std::optional<ScalarType>);
using ColumnSumsFn =
    Tensor (*)(const Tensor&, const std::optional<Tensor>&, ScalarType);

// The dtypes the column sums take and the one they accumulate (and by
// default return) in: shared by grouped_mm_bias_backward and the kernel's
// input checks.
inline bool column_sums_takes(ScalarType t) {
  return t == kFloat || t == kDouble || t == kHalf || t == kBFloat16;
}
inline ScalarType column_sums_acc_dtype(ScalarType t) {
  return c10::promoteTypes(t, kFloat);
}

// The output gradient in the inputs' dtype, for the self and mat2
// gradients: their grouped GEMMs take one input dtype, and after an
// out_dtype=float32 forward of bf16/fp16 inputs grad is float32. grad itself
// when it already has `dtype`. On CUDA, `cast` (when given) makes the copy
// in one kernel within the SM carveout: a dispatcher op whose CUDA kernel is
// grouped_mm_grad_to_cuda (cuda/GroupGradCast.h), so a traced backward
// records it. Elsewhere, and when grad requires grad (a double backward:
// the op has no derivative), Tensor::to.
using GradCastFn = Tensor (*)(const Tensor&, ScalarType);

Tensor grouped_mm_grad_in_dtype(
    const Tensor& grad,
    ScalarType dtype,
    GradCastFn cast = nullptr);

// The self and mat2 gradients: grad, in the inputs' dtype `dtype`
// (grouped_mm_grad_in_dtype, cast once for both), times the other operand,
// each in its operand's layout: a column-major operand (the weights as
// w.transpose(-2, -1)) gets a column-major gradient, computed as the
// transposed product, so autograd copies nothing into w's layout. self is
// read only for mat2's gradient and mat2 only for self's, so autograd saves
// each only when the other requires grad (wrap_opt_if); the geometries give
// the layouts. `grouped_mm` and `cast` as in grouped_mm_bias_backward and
// grouped_mm_grad_in_dtype.
std::tuple<Tensor, Tensor> grouped_mm_mat1_mat2_backward(
    const Tensor& grad,
    const std::optional<Tensor>& self,
    const std::optional<Tensor>& mat2,
    const TensorGeometry& self_geometry,
    const TensorGeometry& mat2_geometry,
    ScalarType dtype,
    const std::optional<Tensor>& offs,
    std::array<bool, 2> grad_input_mask,
    GroupedMMFn grouped_mm = nullptr,
    GradCastFn cast = nullptr);

Tensor grouped_mm_bias_backward(
    const Tensor& grad,
    int64_t self_dim,
    int64_t mat2_dim,
    const std::optional<Tensor>& offs,
    GroupedMMFn grouped_mm = nullptr,
    std::optional<ScalarType> out_dtype = std::nullopt,
    ColumnSumsFn column_sums = nullptr);

}  // namespace at::native
