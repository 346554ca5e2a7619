// Whether this binary holds the Hopper kernels' sm_90a code for the current
// GPU. This unit is built with the targets of the other GroupedMMSm90_*.cu
// units: in an image without sm_90a features (plain sm_90, or PTX of an
// older target) CUTLASS compiles their kernels to stubs that print an error
// and do no work, so the dispatch must not pick them there.

#if !defined(USE_ROCM)  // CUDA only, like GroupedMMSm90.cuh
#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <array>
#include <atomic>
#include <cstdint>

namespace at::native::grouped_mm {
namespace {

constexpr int kMarkerInts = 8;

// Never launched. Only an image built with sm_90a features has its static
// shared memory, and the attributes of the image the driver picked for a
// GPU can be read without a launch or a sync.
__global__ void sm90a_code_marker(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ int marker[kMarkerInts];
  marker[threadIdx.x % kMarkerInts] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = marker[(threadIdx.x + 1) % kMarkerInts];
#endif
}

bool current_image_has_sm90a_code() {
  cudaFuncAttributes attributes{};
  // An error an earlier launch left pending belongs to its caller: clear
  // only the one this query sets.
  const bool error_pending = cudaPeekAtLastError() != cudaSuccess;
  const cudaError_t error =
      cudaFuncGetAttributes(&attributes, sm90a_code_marker);
  if (error == cudaErrorInvalidDeviceFunction ||
      error == cudaErrorNoKernelImageForDevice) {
    // No image for this GPU at all. The error is not sticky: clear it, so
    // that the next launch check does not report it.
    if (!error_pending) {
      (void)cudaGetLastError();
    }
    return false;
  }
  C10_CUDA_CHECK(error);
  return attributes.sharedSizeBytes >= sizeof(int) * kMarkerInts;
}

}  // namespace

bool hopper_kernels_built() {
  const c10::DeviceIndex device = c10::cuda::current_device();
  if (at::cuda::getDeviceProperties(device)->major != 9) {
    return false;
  }
  constexpr int kCachedDevices = 64;
  // 0: not asked yet, 1: absent, 2: built.
  static std::array<std::atomic<int8_t>, kCachedDevices> cached{};
  if (device < kCachedDevices) {
    const int8_t known = cached[device].load(std::memory_order_relaxed);
    if (known != 0) {
      return known == 2;
    }
  }
  const bool built = current_image_has_sm90a_code();
  if (device < kCachedDevices) {
    cached[device].store(built ? 2 : 1, std::memory_order_relaxed);
  }
  return built;
}

}  // namespace at::native::grouped_mm
#endif  // !defined(USE_ROCM)
