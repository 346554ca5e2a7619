#pragma once

// How the SM carveout policy (SMCarveout.h) reaches the CUDA GEMM backends:
//
//   backend             mechanism
//   CUTLASS kernels     persistent grid of at most current_device_sm_limit()
//   cuBLAS (non-Lt)     CublasSmCountTargetGuard around the call
//   cuBLASLt            set_cublaslt_sm_count_target(desc, ...)
//
// cuBLAS treats the SM count target as a hint for its heuristics and for the
// grid of its persistent kernels; a kernel that launches one CTA per output
// tile still spreads over every SM. GEMMs whose kernels are like that
// (float32, float64, complex) therefore also run on a green-context stream
// of SMs - k SMs (GreenContextStreamCUDA.h).

#include <ATen/cuda/SMCarveout.h>

#include <cstdint>

// The ROCm build hipifies this header: there only the grid limit is
// declared (for the grouped-mm backward's kernels, built for ROCm too); the
// cuBLAS parts below are CUDA-only, as SMCarveoutCUDA.cpp defines them.
#if !defined(USE_ROCM)
#include <cublasLt.h>
#include <cublas_v2.h>
#endif

namespace at::cuda {

// SMs a persistent kernel may use on the current device (its SM count minus
// the context's carveout). Raises when the carveout is out of range.
int64_t current_device_sm_limit();

#if !defined(USE_ROCM)

// The SM count target for `carveout` on the current device (SMs - k), read
// once by the caller so that one call site sees one k even if another
// thread changes the setting meanwhile: 0 when k is 0.
int32_t current_device_sm_count_target(int64_t carveout);

// The SM count target for a GEMM on the current stream: 0 when no carveout
// is set, the SMs of its green context when it is one of the carveout's
// green-context streams (GreenContextStreamCUDA.h; cuBLAS would otherwise
// size for the whole device there), else SMs - k.
int32_t current_stream_sm_count_target();

// Sets cublasSetSmCountTarget on `handle` for one scope and restores the
// handle's previous target on exit. A target of 0 (no carveout) leaves the
// handle alone, so the common case costs nothing.
class CublasSmCountTargetGuard {
 public:
  explicit CublasSmCountTargetGuard(
      cublasHandle_t handle,
      int32_t sm_count_target = current_stream_sm_count_target());
  ~CublasSmCountTargetGuard();
  CublasSmCountTargetGuard(const CublasSmCountTargetGuard&) = delete;
  CublasSmCountTargetGuard& operator=(const CublasSmCountTargetGuard&) =
      delete;

 private:
  cublasHandle_t handle_;
  int previous_ = 0;
  bool active_ = false;
};

// Sets CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET on `desc`; a target of 0 (no
// carveout) leaves `desc` alone.
void set_cublaslt_sm_count_target(
    cublasLtMatmulDesc_t desc,
    int32_t sm_count_target = current_stream_sm_count_target());

#endif  // !defined(USE_ROCM)

}  // namespace at::cuda
