// Registers the overlap_ops operators. This file only routes to aten/; no
// kernel logic lives here.

#include <ATen/native/GroupedMM.h>
#include <ATen/native/GroupedMMValidation.h>
#ifdef OVERLAP_OPS_WITH_CUDA
#include <ATen/native/cuda/GroupedMMCUDA.h>
#endif

#include <torch/library.h>

#include <memory>
#include <mutex>

namespace overlap_ops {
namespace {

constexpr const char* kGroupedMMSchema =
    "grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, "
    "Tensor? bias=None, ScalarType? out_dtype=None) -> Tensor";

// Registrations that override aten::_grouped_mm's backend kernels. They are
// created by route_aten_grouped_mm(true) and removed (by destroying the
// Library objects) on route_aten_grouped_mm(false).
struct AtenRoute {
  std::mutex mutex;
  std::unique_ptr<torch::Library> cpu;
  std::unique_ptr<torch::Library> cuda;
};

AtenRoute& aten_route() {
  static AtenRoute route;
  return route;
}

std::unique_ptr<torch::Library> make_aten_impl(c10::DispatchKey key) {
  return std::make_unique<torch::Library>(
      torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
}

bool route_aten_grouped_mm(bool enabled) {
  AtenRoute& route = aten_route();
  std::lock_guard<std::mutex> lock(route.mutex);
  const bool was_enabled = route.cpu != nullptr;
  if (enabled == was_enabled) {
    return was_enabled;
  }
  if (!enabled) {
    route.cpu.reset();
    route.cuda.reset();
    return was_enabled;
  }
  route.cpu = make_aten_impl(c10::DispatchKey::CPU);
  route.cpu->impl("_grouped_mm", TORCH_FN(at::native::grouped_mm_cpu));
#ifdef OVERLAP_OPS_WITH_CUDA
  route.cuda = make_aten_impl(c10::DispatchKey::CUDA);
  route.cuda->impl("_grouped_mm", TORCH_FN(at::native::grouped_mm_cuda));
#endif
  return was_enabled;
}

void set_checked_offsets(bool enabled) {
  at::native::set_grouped_mm_checked_offsets(enabled);
}

bool checked_offsets() {
  return at::native::grouped_mm_checked_offsets();
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
  m.def("_set_checked_offsets(bool enabled) -> ()",
        &overlap_ops::set_checked_offsets);
  m.def("_checked_offsets() -> bool", &overlap_ops::checked_offsets);
  m.def("_has_cuda_kernels() -> bool", &overlap_ops::has_cuda_kernels);
}

TORCH_LIBRARY_IMPL(overlap_ops, CPU, m) {
  m.impl("grouped_mm", TORCH_FN(at::native::grouped_mm_cpu));
}

#ifdef OVERLAP_OPS_WITH_CUDA
TORCH_LIBRARY_IMPL(overlap_ops, CUDA, m) {
  m.impl("grouped_mm", TORCH_FN(at::native::grouped_mm_cuda));
}
#endif
