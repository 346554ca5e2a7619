// Applies the SM carveout to hipBLASLt and rocBLAS; see CarveoutBlasHIP.h.

#include <ATen/hip/CarveoutBlasHIP.h>

#include <ATen/cuda/CUMask.h>
#include <ATen/hip/CarveoutStreamHIP.h>
#include <c10/util/Exception.h>

namespace at::cuda {

namespace {

// The hint is the SMs the mask enables, under the same rounding as the
// mask the GEMM runs under.
int32_t compute_sm_count_target(c10::DeviceIndex device, int64_t carveout) {
  if (carveout == 0) {
    return 0;
  }
  return static_cast<int32_t>(
      hip_carveout_enabled_cus(device, carveout) /
      hip_cu_topology(device).cus_per_sm);
}

}  // namespace

HipCarveoutGemmScope::HipCarveoutGemmScope(
    c10::DeviceIndex device,
    int64_t carveout,
    hipStream_t current)
    : scope_(hip_carveout_stream_cache(), device, carveout, current),
      sm_count_target_(compute_sm_count_target(device, carveout)) {}

#if AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET
namespace {

// The version of the libhipblaslt loaded in this process, read once; -1
// when the query fails.
int64_t hipblaslt_runtime_version(hipblasLtHandle_t handle) {
  static const int64_t version = [handle] {
    int reported = 0;
    return hipblasLtGetVersion(handle, &reported) == HIPBLAS_STATUS_SUCCESS
        ? int64_t{reported}
        : int64_t{-1};
  }();
  return version;
}

}  // namespace

void set_hipblaslt_sm_count_target(
    hipblasLtHandle_t handle,
    hipblasLtMatmulDesc_t desc,
    int32_t sm_count_target) {
  if (sm_count_target == 0) {
    return;
  }
  const int64_t version = hipblaslt_runtime_version(handle);
  if (!hipblaslt_takes_sm_count_target(version)) {
    TORCH_WARN_ONCE(
        "sm_carveout: the hipBLASLt loaded at run time (version ", version,
        ") has no SM_COUNT_TARGET (needs ",
        kHipblasltSmCountTargetMinVersion, "); GEMMs are bounded by the "
        "CU mask alone, which does not apply under graph capture");
    return;
  }
  const hipblasStatus_t status = hipblasLtMatmulDescSetAttribute(
      desc, HIPBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_count_target,
      sizeof(sm_count_target));
  TORCH_CHECK(
      status == HIPBLAS_STATUS_SUCCESS,
      "hipblasLtMatmulDescSetAttribute(SM_COUNT_TARGET=", sm_count_target,
      ") failed with status ", static_cast<int>(status));
}
#endif

#if AT_ROCM_HAS_ROCBLAS
RocBlasStreamScope::RocBlasStreamScope(
    rocblas_handle handle,
    hipStream_t stream)
    : handle_(handle) {
  TORCH_CHECK(
      rocblas_get_stream(handle_, &previous_) == rocblas_status_success,
      "rocblas_get_stream failed");
  TORCH_CHECK(
      rocblas_set_stream(handle_, stream) == rocblas_status_success,
      "rocblas_set_stream failed");
}

RocBlasStreamScope::~RocBlasStreamScope() {
  (void)rocblas_set_stream(handle_, previous_);
}
#endif

}  // namespace at::cuda
