#pragma once

// CUDA backend of the restricted-stream cache (CarveoutStreamCache.h): a
// stream of a CUDA green context that owns SMs - k SMs.
//
// cuBLAS's float32 (TF32 or not), float64 and complex kernels launch one CTA
// per output tile: cublasSetSmCountTarget changes which kernel runs, but the
// scheduler still spreads its CTAs over every SM. A kernel launched on a
// green context's stream runs on that context's SMs only, as one launched
// on a CU-masked stream does on ROCm.
//
// The partition is SMs - k rounded down to the driver's granularity
// (green_context_sm_count in SMCarveout.h; 8 SMs on SM90), so it never
// exceeds the budget; the driver's partition is checked against it before
// the context is created. A k that leaves fewer SMs than the smallest
// partition raises an error naming k. One green context per (device,
// partition), created once and kept (a handful per device); one stream of
// it per caller stream, owned by the cache (CarveoutStreamCache.h).
//
// GreenContextGemmScope makes the green stream current for the scope, so
// getCurrentCUDABlasHandle() binds PyTorch's cuBLAS handle, and its
// per-(handle, stream) workspace, to it, and allocations inside the scope
// belong to that stream.
//
// Needs a CUDA 12.8+ toolkit at build time and a driver with the
// green-context entry points (c10::cuda::DriverAPI resolves them at run
// time); otherwise GEMMs keep the SM count target alone and a one-time
// warning says why (green_context_unavailable_reason).

#include <ATen/cuda/CarveoutStreamCache.h>
#include <ATen/cuda/SMCarveout.h>
#include <c10/core/Device.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace at::cuda {

// Why green contexts cannot confine GEMMs on `device` in this process (a
// toolkit, or a PyTorch build, older than CUDA 12.8, a driver without the
// entry points, a device the driver cannot partition), or nullopt when they
// can. Probed once per device.
std::optional<std::string> green_context_unavailable_reason(
    c10::DeviceIndex device);

// SMs of the green context that confines GEMMs on `device` under
// `carveout`, as planned from the device's partition granularity (the
// driver's partition, checked at creation, has at least this many and at
// most SMs - k). Raises like green_context_sm_count.
int64_t green_context_partition_sm_count(
    c10::DeviceIndex device,
    int64_t carveout);

// Backend over cuGreenCtx* (driver entry points) and cudaEvent*.
std::unique_ptr<CarveoutStreamBackend> make_green_context_stream_backend();

// The cache every CUDA GEMM call site shares. Never destroyed: the driver
// may already be torn down when static destructors run, so the green
// contexts and the streams the cache still holds live as long as the
// process (as c10's stream pools do).
CarveoutStreamCache& green_context_stream_cache();

// SMs of the green context behind `stream`, a stream of
// green_context_stream_cache(); 0 for any other stream.
int64_t green_context_stream_sm_count(CarveoutStream stream);

// Runs one GEMM call on the green-context stream of (current device,
// partition of k, current stream):
//   GreenContextGemmScope confine(/*confine=*/dtype_needs_it);
//   ... getCurrentCUDABlasHandle(), confine.sm_count_target() ...
//   confine.join();
// Nothing happens (and sm_count_target() is the plain SMs - k target) when
// `confine` is false, k == 0, the current stream is capturing, or green
// contexts are unavailable (a one-time warning). A scope opened on a green
// stream (a GEMM call inside another's scope) keeps that stream.
class GreenContextGemmScope {
 public:
  explicit GreenContextGemmScope(
      bool confine,
      int64_t carveout = requested_sm_carveout());
  ~GreenContextGemmScope();
  GreenContextGemmScope(const GreenContextGemmScope&) = delete;
  GreenContextGemmScope& operator=(const GreenContextGemmScope&) = delete;

  // Whether the scope moved its work onto a green-context stream (not when
  // it opened on one).
  bool confined() const {
    return stream_guard_.has_value();
  }
  // For cublasSetSmCountTarget / CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: the
  // partition's SMs when confined (cuBLAS sees the whole device otherwise),
  // else current_device_sm_count_target(k).
  int32_t sm_count_target() const {
    return sm_count_target_;
  }
  // Restores the caller's stream and makes it wait for the scope's work;
  // raises here, where the destructor could only warn.
  void join();

 private:
  std::optional<CarveoutStreamScope> fork_;
  std::optional<c10::cuda::CUDAStreamGuard> stream_guard_;
  int32_t sm_count_target_ = 0;
};

}  // namespace at::cuda
