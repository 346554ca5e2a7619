// Registers the SM-carveout ops: the policy (aten/src/ATen/cuda/SMCarveout.h)
// as private ops for the tests, and the switch that routes aten::mm, addmm,
// bmm and baddbmm (CUDA) to the carveout-aware kernels of
// aten/src/ATen/cuda/CarveoutBlasCUDA.h while overlap_ops.sm_carveout(k) is
// active. This file only routes to aten/; no carveout logic lives here.

#include <ATen/cuda/SMCarveout.h>
#ifdef OVERLAP_OPS_WITH_CUDA
#include <ATen/cuda/CarveoutBlasCUDA.h>
#include <ATen/cuda/CarveoutStreamCUDA.h>
#endif

#include "AtenOverride.h"

#include <torch/library.h>

#include <string>
#include <vector>

namespace overlap_ops {
namespace {

int64_t sm_count_after_carveout(int64_t total_sms, int64_t k) {
  return at::cuda::sm_count_after_carveout(total_sms, k);
}

void check_sm_carveout(int64_t k) {
  at::cuda::check_sm_carveout(k);
}

int64_t blas_sm_count_target(int64_t total_sms) {
  return at::cuda::blas_sm_count_target(total_sms);
}

int64_t green_context_sm_count(
    int64_t total_sms,
    int64_t k,
    int64_t min_partition,
    int64_t alignment) {
  return at::cuda::green_context_sm_count(
      total_sms, k, min_partition, alignment);
}

// Why GEMMs on `device` cannot be confined to a green context, or "" when
// they can.
std::string green_context_status(int64_t device) {
#ifdef OVERLAP_OPS_WITH_CUDA
  const auto reason = at::cuda::green_context_unavailable_reason(
      static_cast<c10::DeviceIndex>(device));
  return reason.value_or("");
#else
  (void)device;
  return "overlap_ops was built without CUDA";
#endif
}

// [stream handle, partition SMs] of the cached green-context stream of
// (device, k), for tests that launch a probe kernel on it.
std::vector<int64_t> green_context_stream(int64_t device, int64_t k) {
#ifdef OVERLAP_OPS_WITH_CUDA
  auto stream = at::cuda::green_context_stream_cache().restricted_stream(
      static_cast<c10::DeviceIndex>(device), k);
  return {reinterpret_cast<int64_t>(stream),
          at::cuda::green_context_stream_sm_count(stream)};
#else
  (void)device;
  (void)k;
  TORCH_CHECK(false, "overlap_ops was built without CUDA");
#endif
}

// The aten::{mm,addmm,bmm,baddbmm} CUDA overrides. A CPU-only build keeps
// only the on/off state, so the bookkeeping is the same everywhere.
AtenOverride::Libraries make_carveout_gemm_overrides() {
  AtenOverride::Libraries libs;
#ifdef OVERLAP_OPS_WITH_CUDA
  libs.push_back(AtenOverride::aten_impl(c10::DispatchKey::CUDA));
  torch::Library& lib = *libs.back();
  lib.impl("mm", TORCH_FN(at::cuda::carveout_mm));
  lib.impl("mm.out", TORCH_FN(at::cuda::carveout_mm_out));
  lib.impl("bmm", TORCH_FN(at::cuda::carveout_bmm));
  lib.impl("bmm.out", TORCH_FN(at::cuda::carveout_bmm_out));
  lib.impl("addmm", TORCH_FN(at::cuda::carveout_addmm));
  lib.impl("addmm.out", TORCH_FN(at::cuda::carveout_addmm_out));
  lib.impl("addmm_", TORCH_FN(at::cuda::carveout_addmm_));
  lib.impl("baddbmm", TORCH_FN(at::cuda::carveout_baddbmm));
  lib.impl("baddbmm.out", TORCH_FN(at::cuda::carveout_baddbmm_out));
  lib.impl("baddbmm_", TORCH_FN(at::cuda::carveout_baddbmm_));
#endif
  return libs;
}

AtenOverride& carveout_gemm_override() {
  static AtenOverride route(make_carveout_gemm_overrides);
  return route;
}

// Turns the routing on or off; returns whether it was on before.
bool route_aten_carveout_gemms(bool enabled) {
  return carveout_gemm_override().set(enabled);
}

bool carveout_gemms_routed() {
  return carveout_gemm_override().enabled();
}

}  // namespace
}  // namespace overlap_ops

TORCH_LIBRARY_FRAGMENT(overlap_ops, m) {
  m.def("_sm_count_after_carveout(int total_sms, int k) -> int",
        &overlap_ops::sm_count_after_carveout);
  m.def("_check_sm_carveout(int k) -> ()", &overlap_ops::check_sm_carveout);
  m.def("_blas_sm_count_target(int total_sms) -> int",
        &overlap_ops::blas_sm_count_target);
  m.def("_green_context_sm_count(int total_sms, int k, int min_partition, "
        "int alignment) -> int",
        &overlap_ops::green_context_sm_count);
  m.def("_green_context_status(int device) -> str",
        &overlap_ops::green_context_status);
  m.def("_green_context_stream(int device, int k) -> int[]",
        &overlap_ops::green_context_stream);
  m.def("_route_aten_carveout_gemms(bool enabled) -> bool",
        &overlap_ops::route_aten_carveout_gemms);
  m.def("_carveout_gemms_routed() -> bool",
        &overlap_ops::carveout_gemms_routed);
}
