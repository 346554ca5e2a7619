#pragma once

// How the SM carveout reaches ROCm's BLAS libraries. One scope per GEMM:
//   HipCarveoutGemmScope carveout(device, k, current_stream);
//   set_hipblaslt_sm_count_target(handle, desc, carveout.sm_count_target());
//   hipblasLtMatmul(..., carveout.stream());   // or rocBLAS, see below
//   carveout.join();
// hipBLASLt and rocBLAS both run on the CU-masked stream, which is what
// reserves the CUs; hipBLASLt >= 1.4 also gets HIPBLASLT_MATMUL_DESC_
// SM_COUNT_TARGET, a hint that sizes its grid (it reserves nothing by
// itself, but it still applies under graph capture, where the masked stream
// does not; see CarveoutStreamCache.h). The headers say whether the hint
// can be compiled; the library loaded at run time says whether it is set.

#include <ATen/cuda/CarveoutStreamCache.h>

#include <hip/hip_runtime.h>

#include <cstdint>

#if __has_include(<hipblaslt/hipblaslt.h>) && \
    __has_include(<hipblaslt/hipblaslt-version.h>)
#include <hipblaslt/hipblaslt-version.h>
#include <hipblaslt/hipblaslt.h>
// SM_COUNT_TARGET appeared in hipBLASLt 1.4. It is an enum value, not a
// macro, so only the version can tell whether it exists.
#if HIPBLASLT_VERSION_MAJOR > 1 || \
    (HIPBLASLT_VERSION_MAJOR == 1 && HIPBLASLT_VERSION_MINOR >= 4)
#define AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET 1
#endif
#endif
#ifndef AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET
#define AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET 0
#endif

#if __has_include(<rocblas/rocblas.h>)
#include <rocblas/rocblas.h>
#define AT_ROCM_HAS_ROCBLAS 1
#else
#define AT_ROCM_HAS_ROCBLAS 0
#endif

namespace at::cuda {

// Forks the GEMM onto the masked stream of the process-wide cache and
// computes the hint. carveout == 0 costs nothing and sets no hint.
class HipCarveoutGemmScope {
 public:
  HipCarveoutGemmScope(
      c10::DeviceIndex device,
      int64_t carveout,
      hipStream_t current);

  hipStream_t stream() const {
    return static_cast<hipStream_t>(scope_.stream());
  }
  // SMs the mask enables (SMs - k, see CUMask.h), or 0 for "no hint".
  int32_t sm_count_target() const {
    return sm_count_target_;
  }
  void join() {
    scope_.join();
  }

 private:
  CarveoutStreamScope scope_;
  int32_t sm_count_target_ = 0;
};

#if AT_ROCM_HIPBLASLT_HAS_SM_COUNT_TARGET
// Sets HIPBLASLT_MATMUL_DESC_SM_COUNT_TARGET; target 0 leaves desc alone.
// The libhipblaslt loaded at run time may predate the attribute (built
// against newer headers): then desc is left alone too, with a one-time
// warning, and the CU mask alone bounds the GEMM (CUMask.h,
// hipblaslt_takes_sm_count_target). `handle` is only read for the version.
void set_hipblaslt_sm_count_target(
    hipblasLtHandle_t handle,
    hipblasLtMatmulDesc_t desc,
    int32_t sm_count_target);
#endif

#if AT_ROCM_HAS_ROCBLAS
// rocBLAS has no SM-count knob, so its calls run on the masked stream:
// points `handle` at `stream` and restores the previous stream on exit.
class RocBlasStreamScope {
 public:
  RocBlasStreamScope(rocblas_handle handle, hipStream_t stream);
  ~RocBlasStreamScope();
  RocBlasStreamScope(const RocBlasStreamScope&) = delete;
  RocBlasStreamScope& operator=(const RocBlasStreamScope&) = delete;

 private:
  rocblas_handle handle_;
  hipStream_t previous_ = nullptr;
};
#endif

}  // namespace at::cuda
