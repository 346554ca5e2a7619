// Registers the SM-carveout ops that overlap_ops.sm_carveout(k) uses: the
// check of k against the policy (aten/src/ATen/cuda/SMCarveout.h), whether
// green contexts work on a device, and the switch that routes aten::mm,
// addmm, bmm and baddbmm (CUDA) to the carveout-aware kernels of
// aten/src/ATen/cuda/CarveoutGemmCUDA.h. Tests reach the rest of the policy
// through overlap_ops._testing (csrc/testing/). This file only routes to
// aten/; no carveout logic lives here.

#include <ATen/cuda/SMCarveout.h>
#ifdef OVERLAP_OPS_WITH_CUDA
#include <ATen/cuda/CarveoutGemmCUDA.h>
#include <ATen/cuda/GreenContextStreamCUDA.h>
#endif

#include "AtenOverride.h"

#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <string>

namespace overlap_ops {
namespace {

// Checks k against the policy: 0 <= k < total_sms when the device's SM count
// is known, else only k >= 0.
void check_sm_carveout(int64_t k, std::optional<int64_t> total_sms) {
  if (total_sms.has_value()) {
    (void)at::cuda::sm_count_after_carveout(*total_sms, k);
  } else {
    at::cuda::check_sm_carveout(k);
  }
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
  m.def("_check_sm_carveout(int k, int? total_sms=None) -> ()",
        &overlap_ops::check_sm_carveout);
  m.def("_green_context_status(int device) -> str",
        &overlap_ops::green_context_status);
  m.def("_route_aten_carveout_gemms(bool enabled) -> bool",
        &overlap_ops::route_aten_carveout_gemms);
  m.def("_carveout_gemms_routed() -> bool",
        &overlap_ops::carveout_gemms_routed);
}
