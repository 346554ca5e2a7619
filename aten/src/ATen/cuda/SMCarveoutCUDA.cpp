// CUDA part of the SM-carveout policy; see SMCarveoutCUDA.h. Host code only,
// compiled by the C++ compiler, so its errors unwind through ordinary frames.

// The ROCm build hipifies ATen/cuda/*.cpp: there only the grid limit of
// persistent kernels is built (the grouped-mm backward's kernels, which
// ROCm builds too, size their grids with it); the rest is cuBLAS-only, and
// the ROCm side of the GEMM carveout lives in ATen/hip/ (CU-masked streams).

#include <ATen/cuda/SMCarveoutCUDA.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>

#if !defined(USE_ROCM)
#include <ATen/cuda/GreenContextStreamCUDA.h>
#endif

namespace at::cuda {
namespace {

int64_t current_device_sm_count() {
  return getCurrentDeviceProperties()->multiProcessorCount;
}

}  // namespace

int64_t current_device_sm_limit() {
  return effective_sm_count(current_device_sm_count());
}

#if !defined(USE_ROCM)

int32_t current_device_sm_count_target(int64_t carveout) {
  if (carveout == 0) {
    return 0;  // skip the device-properties lookup in the common case
  }
  return static_cast<int32_t>(
      sm_count_after_carveout(current_device_sm_count(), carveout));
}

int32_t current_stream_sm_count_target() {
  const int64_t carveout = requested_sm_carveout();
  if (carveout == 0) {
    return 0;
  }
  const int64_t green = green_context_stream_sm_count(
      static_cast<CarveoutStream>(getCurrentCUDAStream().stream()));
  if (green != 0) {
    return static_cast<int32_t>(green);
  }
  return current_device_sm_count_target(carveout);
}

CublasSmCountTargetGuard::CublasSmCountTargetGuard(
    cublasHandle_t handle,
    int32_t sm_count_target)
    : handle_(handle) {
  if (sm_count_target == 0) {
    return;
  }
  cublasStatus_t status = cublasGetSmCountTarget(handle_, &previous_);
  TORCH_CHECK(
      status == CUBLAS_STATUS_SUCCESS, "cublasGetSmCountTarget failed: ",
      cublasGetStatusString(status));
  status = cublasSetSmCountTarget(handle_, sm_count_target);
  TORCH_CHECK(
      status == CUBLAS_STATUS_SUCCESS, "cublasSetSmCountTarget(",
      sm_count_target, ") failed: ", cublasGetStatusString(status));
  active_ = true;
}

CublasSmCountTargetGuard::~CublasSmCountTargetGuard() {
  if (active_) {
    // A destructor must not throw; restoring a value the handle reported a
    // moment ago does not fail in practice.
    (void)cublasSetSmCountTarget(handle_, previous_);
  }
}

void set_cublaslt_sm_count_target(
    cublasLtMatmulDesc_t desc,
    int32_t sm_count_target) {
  if (sm_count_target == 0) {
    return;
  }
  const cublasStatus_t status = cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_count_target,
      sizeof(sm_count_target));
  TORCH_CHECK(
      status == CUBLAS_STATUS_SUCCESS,
      "cublasLtMatmulDescSetAttribute(SM_COUNT_TARGET=", sm_count_target,
      ") failed: ", cublasLtGetStatusString(status));
}

#endif  // !defined(USE_ROCM)

}  // namespace at::cuda
