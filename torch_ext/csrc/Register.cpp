// Registers the overlap_ops operators. This file only routes to aten/; no
// kernel logic lives here.

#include <ATen/native/GroupedMM.h>
#include <ATen/native/GroupedMMValidation.h>
#ifdef OVERLAP_OPS_WITH_CUDA
#include <ATen/native/cuda/GroupColumnSums.h>
#include <ATen/native/cuda/GroupedMMCUDA.h>
#include <ATen/native/cuda/GroupGradCast.h>
#include <dlfcn.h>
#endif

#include "AtenOverride.h"
#include "GroupedMMAutograd.h"

#include <torch/library.h>

namespace overlap_ops {
namespace {

constexpr const char* kGroupedMMSchema =
    "grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, "
    "Tensor? bias=None, ScalarType? out_dtype=None) -> Tensor";

#ifdef OVERLAP_OPS_WITH_CUDA
using GroupedMMKernel = at::Tensor (*)(
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, std::optional<at::ScalarType>);

// Upstream's CUDA kernel, looked up at run time: a direct reference would
// not load into a torch that does not export it with this signature (2.11
// does not). Null there, and the rule's upstream calls stay ours.
GroupedMMKernel upstream_grouped_mm_cuda() {
  static const GroupedMMKernel kernel = [] {
    void* lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    return lib == nullptr ? nullptr
        : reinterpret_cast<GroupedMMKernel>(dlsym(
              lib,
              "_ZN2at6native16_grouped_mm_cudaERKNS_6TensorES3_RKSt8optional"
              "IS1_ES7_S4_IN3c1010ScalarTypeEE"));
  }();
  return kernel;
}

// The routed CUDA kernel: stock's own where it runs sync-free on a GPU this
// build has no tuned kernels for, ours otherwise (the same rule the patched
// wheel's _grouped_mm_cuda applies).
at::Tensor routed_grouped_mm_cuda(
    const at::Tensor& self,
    const at::Tensor& mat2,
    const std::optional<at::Tensor>& offs,
    const std::optional<at::Tensor>& bias,
    std::optional<at::ScalarType> out_dtype) {
  const GroupedMMKernel upstream = upstream_grouped_mm_cuda();
  if (upstream != nullptr &&
      at::native::grouped_mm_upstream_takes(self, mat2, offs, bias,
                                            out_dtype)) {
    return upstream(self, mat2, offs, bias, out_dtype);
  }
  return at::native::grouped_mm_cuda(self, mat2, offs, bias, out_dtype);
}
#endif

// aten::_grouped_mm's CPU (and CUDA) kernels replaced by ours while
// routing is on, and its autograd kernel by the op's, so a routed call
// takes bias gradients and out_dtype=float32 backwards as the op does.
AtenOverride::Libraries make_grouped_mm_overrides() {
  AtenOverride::Libraries libs;
  libs.push_back(AtenOverride::aten_impl(c10::DispatchKey::Autograd));
  libs.back()->impl("_grouped_mm", TORCH_FN(aten_grouped_mm_autograd));
  libs.push_back(AtenOverride::aten_impl(c10::DispatchKey::CPU));
  libs.back()->impl("_grouped_mm", TORCH_FN(at::native::grouped_mm_cpu));
#ifdef OVERLAP_OPS_WITH_CUDA
  libs.push_back(AtenOverride::aten_impl(c10::DispatchKey::CUDA));
  libs.back()->impl("_grouped_mm", TORCH_FN(routed_grouped_mm_cuda));
#endif
  return libs;
}

bool route_aten_grouped_mm(bool enabled) {
  static AtenOverride route(make_grouped_mm_overrides);
  return route.set(enabled);
}

void set_checked_offsets(std::optional<bool> enabled) {
  at::native::set_grouped_mm_checked_offsets(enabled);
}

std::optional<bool> checked_offsets_override() {
  return at::native::grouped_mm_checked_offsets_override();
}

bool has_cuda_kernels() {
#ifdef OVERLAP_OPS_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace
}  // namespace overlap_ops

TORCH_LIBRARY(overlap_ops, m) {
  m.def(overlap_ops::kGroupedMMSchema);
  m.def("_route_aten_grouped_mm(bool enabled) -> bool",
        &overlap_ops::route_aten_grouped_mm);
  m.def("_set_checked_offsets(bool? enabled) -> ()",
        &overlap_ops::set_checked_offsets);
  m.def("_checked_offsets_override() -> bool?",
        &overlap_ops::checked_offsets_override);
  m.def("_has_cuda_kernels() -> bool", &overlap_ops::has_cuda_kernels);
  // The bias gradient's per-group column sums (cuda/GroupColumnSums.h); CUDA
  // only, called by the C++ autograd through the dispatcher so that
  // torch.compile sees its fake kernel (_fake.py).
  m.def("_group_column_sums(Tensor grad, Tensor? offs, ScalarType dtype) "
        "-> Tensor");
  // The backward's cast of an out_dtype=float32 gradient to the inputs'
  // dtype within the SM carveout (cuda/GroupGradCast.h); CUDA only, called
  // like _group_column_sums.
  m.def("_grouped_mm_grad_to(Tensor grad, ScalarType dtype) -> Tensor");
}

TORCH_LIBRARY_IMPL(overlap_ops, CPU, m) {
  m.impl("grouped_mm", TORCH_FN(at::native::grouped_mm_cpu));
}

#ifdef OVERLAP_OPS_WITH_CUDA
TORCH_LIBRARY_IMPL(overlap_ops, CUDA, m) {
  m.impl("grouped_mm", TORCH_FN(at::native::grouped_mm_cuda));
  m.impl("_group_column_sums", TORCH_FN(at::native::group_column_sums_cuda));
  m.impl("_grouped_mm_grad_to", TORCH_FN(at::native::grouped_mm_grad_to_cuda));
}
#endif
