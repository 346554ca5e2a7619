// Test-only op (namespace overlap_ops_testing) that hands the tests the
// cached green-context stream of (device, k) for the device's current
// stream, the one its GEMMs would run on, so they can launch a probe kernel
// on it (aten/src/ATen/cuda/GreenContextStreamCUDA.h). Built only with the
// CUDA kernels.

#include <ATen/cuda/GreenContextStreamCUDA.h>
#include <c10/cuda/CUDAStream.h>

#include <torch/library.h>

#include <cstdint>
#include <vector>

namespace overlap_ops::testing {
namespace {

// [stream handle, partition SMs] of the cached green-context stream.
std::vector<int64_t> green_context_stream(int64_t device, int64_t k) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  const c10::cuda::CUDAStream current =
      c10::cuda::getCurrentCUDAStream(index);
  auto stream = at::cuda::green_context_stream_cache().restricted_stream(
      index, k, static_cast<at::cuda::CarveoutStream>(current.stream()));
  return {reinterpret_cast<int64_t>(stream),
          at::cuda::green_context_stream_sm_count(stream)};
}

}  // namespace
}  // namespace overlap_ops::testing

TORCH_LIBRARY_FRAGMENT(overlap_ops_testing, m) {
  m.def("green_context_stream(int device, int k) -> int[]",
        &overlap_ops::testing::green_context_stream);
}
