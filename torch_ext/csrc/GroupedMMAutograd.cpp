// Autograd for overlap_ops::grouped_mm, registered in C++ (what
// derivatives.yaml and FunctionsManual.cpp are to aten::_grouped_mm in the
// patched wheel). Every gradient is one more overlap_ops::grouped_mm in
// another layout, so backward keeps the offsets on the device and never
// synchronises; the kernels accept any strides, so expanded or zero-stride
// gradients need no copy.
//
// Layout     grad_self                        grad_mat2
// 2d x 3d    g (sM,N)  x b^T (G,N,K) 2d x 3d  a^T (K,sM) x g (sM,N) 2d x 2d
// 3d x 2d    g (M,sN)  x b^T (sN,K)  2d x 2d  a^T (G,K,M) x g (M,sN) 3d x 2d
// 2d x 2d    g (G,M,N) x b^T (N,sK)  3d x 2d  a^T (sK,M) x g (G,M,N) 2d x 3d
// 3d x 3d    g x b^T   batched                a^T x g   batched
//
// self is saved only when mat2 requires grad and mat2 only when self does
// (each is read only for the other's gradient), as upstream's formulas do.
//
// mat2's gradient comes back in mat2's own layout: for a column-major mat2
// (torchtitan passes w.transpose(-2, -1)) it is the transpose of
// (g^T x self), so autograd hands it to the parameter without a transposing
// copy of every expert weight (measured on the H200: that copy made an MoE
// forward + backward step 1.5x slower).
//
// In C++ rather than torch.library.register_autograd: a Python autograd
// kernel runs on every call, inference included, and small layers are
// host-bound.

#include "GroupedMMAutograd.h"

#include <ATen/ATen.h>
#include <ATen/native/GroupedMMBackward.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

namespace overlap_ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using GroupedMMSignature = at::Tensor(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, std::optional<at::ScalarType>);

c10::TypedOperatorHandle<GroupedMMSignature> find_grouped_mm_op(
    const char* name) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow(name, "")
      .typed<GroupedMMSignature>();
}

at::Tensor call_grouped_mm(
    const at::Tensor& a,
    const at::Tensor& b,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype) {
  static const auto op = find_grouped_mm_op("overlap_ops::grouped_mm");
  return op.call(a, b, offs, bias, out_dtype);
}

// aten::_grouped_mm through the dispatcher: with routing on, its CPU and
// CUDA kernels are ours (or, where the dispatch rule says so, upstream's).
at::Tensor call_aten_grouped_mm(
    const at::Tensor& a,
    const at::Tensor& b,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype) {
  static const auto op = find_grouped_mm_op("aten::_grouped_mm");
  return op.call(a, b, offs, bias, out_dtype);
}

using GroupedMMFn = GroupedMMSignature*;

// The bias gradient's column sums through the dispatcher, so a traced
// backward records the op (its fake kernel gives the shape).
at::Tensor call_group_column_sums(
    const at::Tensor& grad,
    const std::optional<at::Tensor>& offs,
    at::ScalarType dtype) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("overlap_ops::_group_column_sums", "")
          .typed<at::Tensor(
              const at::Tensor&, const std::optional<at::Tensor>&,
              at::ScalarType)>();
  return op.call(grad, offs, dtype);
}

bool built_with_cuda() {
#ifdef OVERLAP_OPS_WITH_CUDA
  return true;
#else
  return false;
#endif
}

// The CUDA kernel of the backward's gradient cast (the rule that picks it
// is at::native::grouped_mm_grad_in_dtype), through the dispatcher so a
// traced backward records the op.
at::Tensor call_grad_to(const at::Tensor& grad, at::ScalarType dtype) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("overlap_ops::_grouped_mm_grad_to", "")
          .typed<at::Tensor(const at::Tensor&, at::ScalarType)>();
  return op.call(grad, dtype);
}

// An operand's sizes and strides (symbolic under torch.compile), kept for
// the layout of its gradient when the operand itself is not saved. One
// entry per number: compiled autograd treats top-level integers as dynamic
// inputs but hashes lists into its cache key, so a list of sizes recompiled
// the backward for every new token count.
void save_geometry(
    AutogradContext* ctx, const std::string& name, const at::Tensor& t) {
  ctx->saved_data[name + "_dim"] = t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) {
    const std::string index = std::to_string(i);
    ctx->saved_data[name + "_size" + index] = t.sym_size(i);
    ctx->saved_data[name + "_stride" + index] = t.sym_stride(i);
  }
}

at::TensorGeometry saved_geometry(
    AutogradContext* ctx, const std::string& name) {
  // Compiled autograd may hand integers back as SymInts.
  const int64_t dim =
      ctx->saved_data[name + "_dim"].toSymInt().guard_int(__FILE__, __LINE__);
  std::vector<c10::SymInt> sizes, strides;
  for (int64_t i = 0; i < dim; ++i) {
    const std::string index = std::to_string(i);
    sizes.push_back(ctx->saved_data[name + "_size" + index].toSymInt());
    strides.push_back(ctx->saved_data[name + "_stride" + index].toSymInt());
  }
  return at::TensorGeometry(
      std::move(sizes), std::move(strides), /*storage_offset=*/0);
}

std::optional<at::Tensor> defined_or_nullopt(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// Mm is the grouped mm every product goes through: the op's, or
// aten::_grouped_mm's for a routed call.
template <GroupedMMFn Mm>
class GroupedMMFunction
    : public torch::autograd::Function<GroupedMMFunction<Mm>> {
 public:
  static at::Tensor forward(
      AutogradContext* ctx,
      const at::Tensor& a,
      const at::Tensor& b,
      const std::optional<at::Tensor>& offs,
      const std::optional<at::Tensor>& bias,
      std::optional<at::ScalarType> out_dtype) {
    // Below the autograd keys, so the inner call reaches the CPU/CUDA (or
    // fake) kernel instead of re-entering this autograd kernel.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    // Each operand is read only for the other one's gradient, so it is
    // saved only when the other requires grad (upstream's wrap_opt_if):
    // frozen experts keep no activations alive. The layouts the gradients
    // follow come from the geometries, kept either way.
    ctx->save_for_backward({b.requires_grad() ? a : at::Tensor(),
                            a.requires_grad() ? b : at::Tensor(),
                            offs.value_or(at::Tensor())});
    save_geometry(ctx, "a", a);
    save_geometry(ctx, "b", b);
    ctx->saved_data["dtype"] = a.scalar_type();
    ctx->saved_data["bias_dtype"] = bias.has_value() && bias->defined()
        ? c10::IValue(bias->scalar_type())
        : c10::IValue();
    return Mm(a, b, offs, bias, out_dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> a = defined_or_nullopt(saved[0]);
    const std::optional<at::Tensor> b = defined_or_nullopt(saved[1]);
    const std::optional<at::Tensor> offs = defined_or_nullopt(saved[2]);
    const at::TensorGeometry a_geometry = saved_geometry(ctx, "a");
    const at::TensorGeometry b_geometry = saved_geometry(ctx, "b");
    // self and mat2: grad cast once to their dtype (the kernels take one
    // input dtype, and after out_dtype=float32 grad is float32), each
    // gradient in its operand's layout. bias, which may be float32 with
    // bf16 inputs, is reduced from the unrounded gradient.
    const at::Tensor& grad_out = grads[0];
    at::Tensor grad_a, grad_b, grad_bias;
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1)) {
      std::tie(grad_a, grad_b) = at::native::grouped_mm_mat1_mat2_backward(
          grad_out, a, b, a_geometry, b_geometry,
          ctx->saved_data["dtype"].toScalarType(), offs,
          {ctx->needs_input_grad(0), ctx->needs_input_grad(1)},
          Mm, built_with_cuda() ? &call_grad_to : nullptr);
    }
    // needs_input_grad counts only the tensor arguments that were given:
    // bias follows a, b and, when present, offs.
    const size_t bias_edge = offs.has_value() ? 3 : 2;
    const c10::IValue& bias_dtype = ctx->saved_data["bias_dtype"];
    if (!bias_dtype.isNone() && ctx->needs_input_grad(bias_edge)) {
      // The CUDA build reduces in one kernel within the SM carveout and
      // writes bias's dtype where it can, so no full-grid cast follows. The
      // kernel has no derivative: a double backward (grad_out requiring
      // grad) keeps the grouped-GEMM reduction, which has one.
      const bool one_kernel =
          built_with_cuda() && !grad_out.requires_grad();
      grad_bias = at::native::grouped_mm_bias_backward(
          grad_out, a_geometry.dim(), b_geometry.dim(), offs,
          Mm,
          bias_dtype.toScalarType(),
          one_kernel ? &call_group_column_sums : nullptr);
    }
    return {grad_a, grad_b, at::Tensor(), grad_bias, at::Tensor()};
  }
};

}  // namespace

at::Tensor grouped_mm_autograd(
    const at::Tensor& a,
    const at::Tensor& b,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype) {
  return GroupedMMFunction<&call_grouped_mm>::apply(
      a, b, offs, bias, out_dtype);
}

at::Tensor aten_grouped_mm_autograd(
    const at::Tensor& a,
    const at::Tensor& b,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype) {
  return GroupedMMFunction<&call_aten_grouped_mm>::apply(
      a, b, offs, bias, out_dtype);
}

}  // namespace overlap_ops

TORCH_LIBRARY_IMPL(overlap_ops, Autograd, m) {
  m.impl("grouped_mm", TORCH_FN(overlap_ops::grouped_mm_autograd));
}
