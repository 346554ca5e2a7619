// Applies the SM carveout to hipBLASLt and rocBLAS; see CarveoutBlasHIP.h.

#include <ATen/hip/CarveoutBlasHIP.h>

#include <ATen/cuda/CUMask.h>
#include <ATen/hip/CarveoutStreamHIP.h>
#include <c10/util/Exception.h>

namespace at::cuda {

namespace {

int32_t compute_sm_count_target(c10::DeviceIndex device, int64_t carveout) {
  if (carveout == 0) {
    return 0;
  }
  const CUTopology topo = hip_cu_topology(device);
  return static_cast<int32_t>(sm_carveout_sm_count_target(
      topo.total_cus, topo.cus_per_sm, carveout, topo.wgp_pairs));
}

}  // namespace

HipCarveoutGemmScope::HipCarveoutGemmScope(
    c10::DeviceIndex device,
    int64_t carveout,
    hipStream_t current)
    : scope_(hip_carveout_stream_cache(), device, carveout, current),
      sm_count_target_(compute_sm_count_target(device, carveout)) {}

#if AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET
void set_hipblaslt_sm_count_target(
    hipblasLtMatmulDesc_t desc,
    int32_t sm_count_target) {
  if (sm_count_target == 0) {
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
