// Gradients of _grouped_mm from at:: ops only, so the same host code builds
// inside PyTorch (CPU library) and in the out-of-tree extension.

#include <ATen/native/GroupedMMBackward.h>

#include <ATen/Context.h>
#include <ATen/Functions.h>

namespace at::native {

namespace {

constexpr const char* kOp = "grouped_mm_bias_backward";

// Column-major in the last two dimensions (upstream's test in its
// _grouped_mm formulas).
bool is_column_major(const TensorGeometry& geometry) {
  const SymIntArrayRef sizes = geometry.sym_sizes();
  const SymIntArrayRef strides = geometry.sym_strides();
  const size_t dim = sizes.size();
  return strides[dim - 2] == 1 && strides[dim - 1] == sizes[dim - 2];
}

bool is_low_precision(ScalarType dtype) {
  return dtype == kBFloat16 || dtype == kHalf;
}

// A float32 GEMM on a GPU may read its operands as TF32 (10 mantissa bits).
bool may_round_to_tf32(const Tensor& grad) {
  return grad.scalar_type() == kFloat && grad.is_cuda() &&
      at::globalContext().allowTF32CuBLAS();
}

// Per-group row sums of grad (sum M, N) -> (G, N). One grouped GEMM of a row
// of ones against grad, grouped along K: group g reduces rows
// [offs[g-1], offs[g]) and a group with no rows yields zeros.
Tensor bias_grad_2d_3d(
    const Tensor& grad, const Tensor& offs, GroupedMMFn grouped_mm) {
  const Tensor ones = at::ones_symint({1, grad.sym_size(0)}, grad.options());
  const std::optional<ScalarType> acc_dtype = is_low_precision(
      grad.scalar_type()) ? std::optional<ScalarType>(kFloat) : std::nullopt;
  const GroupedMMFn mm =
      grouped_mm != nullptr ? grouped_mm : &at::_grouped_mm;
  const auto row_sums = [&](const Tensor& rows) {
    return mm(ones, rows, offs, std::nullopt, acc_dtype).squeeze(1);
  };
  if (!may_round_to_tf32(grad)) {
    return row_sums(grad);
  }
  // A sum is not a matmul: nn.Linear's bias gradient is an exact float32
  // sum even with TF32 allowed (a TF32 reduction is off by ~3e-4). Split
  // grad into high, its top 10 mantissa bits (exact in TF32), and the rest
  // (below 2^-10 of grad, so its conversion to TF32, rounded or truncated,
  // stays below 2^-20 of grad): two reductions give a float32-accurate sum.
  // An infinite element makes the rest NaN, so the sum is NaN instead of
  // inf: non-finite either way.
  constexpr int32_t kTf32Mask = ~int32_t{0x1fff};
  const Tensor high =
      at::bitwise_and(grad.view(kInt), kTf32Mask).view(kFloat);
  return row_sums(high).add_(row_sums(at::sub(grad, high)));
}

ScalarType sums_dtype(const Tensor& grad) {
  return column_sums_acc_dtype(grad.scalar_type());
}

bool takes_column_sums(const Tensor& grad, ColumnSumsFn column_sums) {
  return column_sums != nullptr && grad.is_cuda() &&
      column_sums_takes(grad.scalar_type());
}

// The column sums' own dtypes: the accumulator's, or grad's when asked.
ScalarType column_sums_dtype(
    const Tensor& grad, std::optional<ScalarType> out_dtype) {
  return out_dtype == grad.scalar_type() ? grad.scalar_type()
                                         : sums_dtype(grad);
}

// grad (G, M, N) -> (G, N), reduced in at least float32.
Tensor bias_grad_batched(const Tensor& grad) {
  return grad.sum(1, /*keepdim=*/false, sums_dtype(grad));
}

}  // namespace

Tensor grouped_mm_grad_in_dtype(
    const Tensor& grad,
    ScalarType dtype,
    GradCastFn cast) {
  if (!grad.defined() || grad.scalar_type() == dtype) {
    return grad;
  }
  // Tensor subclasses take the op too: the fake and functional tensors of a
  // traced backward are subclass-like, and the traced graph must keep the
  // bounded cast (a DTensor gradient would need a sharding rule for it).
  if (cast != nullptr && grad.is_cuda() && !grad.requires_grad()) {
    return cast(grad, dtype);
  }
  return grad.to(dtype);
}

std::tuple<Tensor, Tensor> grouped_mm_mat1_mat2_backward(
    const Tensor& grad,
    const std::optional<Tensor>& self,
    const std::optional<Tensor>& mat2,
    const TensorGeometry& self_geometry,
    const TensorGeometry& mat2_geometry,
    ScalarType dtype,
    const std::optional<Tensor>& offs,
    std::array<bool, 2> grad_input_mask,
    GroupedMMFn grouped_mm,
    GradCastFn cast) {
  const Tensor g = grouped_mm_grad_in_dtype(grad, dtype, cast);
  if (!g.defined()) {
    return {};
  }
  const GroupedMMFn mm =
      grouped_mm != nullptr ? grouped_mm : &at::_grouped_mm;
  // PyTorch's generated autograd passes an absent offs as an undefined
  // tensor.
  const std::optional<Tensor> group_offs =
      offs.has_value() && offs->defined() ? offs : std::nullopt;
  const auto product = [&](const Tensor& x, const Tensor& y) {
    return mm(x, y, group_offs, std::nullopt, std::nullopt);
  };
  Tensor grad_self, grad_mat2;
  if (grad_input_mask[0]) {
    TORCH_INTERNAL_ASSERT(mat2.has_value() && mat2->defined());
    grad_self = is_column_major(self_geometry)
        ? product(*mat2, g.transpose(-2, -1)).transpose(-2, -1)
        : product(g, mat2->transpose(-2, -1));
  }
  if (grad_input_mask[1]) {
    TORCH_INTERNAL_ASSERT(self.has_value() && self->defined());
    grad_mat2 = is_column_major(mat2_geometry)
        ? product(g.transpose(-2, -1), *self).transpose(-2, -1)
        : product(self->transpose(-2, -1), g);
  }
  return {grad_self, grad_mat2};
}

Tensor grouped_mm_bias_backward(
    const Tensor& grad,
    int64_t self_dim,
    int64_t mat2_dim,
    const std::optional<Tensor>& offs,
    GroupedMMFn grouped_mm,
    std::optional<ScalarType> out_dtype,
    ColumnSumsFn column_sums) {
  TORCH_CHECK(
      !(self_dim == 3 && mat2_dim == 2),
      kOp, ": the 3d x 2d layout has no bias");
  const bool grouped_rows = self_dim == 2 && mat2_dim == 3;
  if (grouped_rows) {
    TORCH_CHECK(
        offs.has_value(),
        kOp, ": offs is required for the 2d x 3d layout");
    TORCH_CHECK(
        grad.dim() == 2,
        kOp, ": grad must be 2-D (sum M, N) for the 2d x 3d layout, got ",
        grad.dim(), "-D");
  } else {
    TORCH_CHECK(
        grad.dim() == 3,
        kOp, ": grad must be 3-D (G, M, N) for the ", self_dim, "d x ",
        mat2_dim, "d layout, got ", grad.dim(), "-D");
  }
  Tensor sums;
  if (takes_column_sums(grad, column_sums)) {
    // The batched layouts' grad (G, M, N) needs no offsets (2d x 2d has
    // them, for K).
    sums = column_sums(
        grad, grouped_rows ? offs : std::nullopt,
        column_sums_dtype(grad, out_dtype));
  } else {
    sums = grouped_rows ? bias_grad_2d_3d(grad, *offs, grouped_mm)
                        : bias_grad_batched(grad);
  }
  return out_dtype.has_value() ? sums.to(*out_dtype) : sums;
}

}  // namespace at::native
