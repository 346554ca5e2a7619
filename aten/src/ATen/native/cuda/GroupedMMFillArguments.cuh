#pragma once

// The one kernel that turns device offsets into per-group GEMM arguments for
// the tensor-core paths (SM80 and SM90). Each path supplies a writer that
// stores one group's problem in its library's format; which rows, columns
// and base offsets a group gets is decided only by group_problem().

#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>

namespace at::native::grouped_mm {

constexpr int kFillThreads = 256;
constexpr int64_t kMaxFillBlocks = 1024;

// Groups that the tensor-core GEMM is told to skip (as an m = 0 problem).
// The libraries leave a k = 0 output unwritten (CUTLASS 3.x) or would spend
// a tile on it, so launch_finish_groups writes those zeros instead.
__device__ __forceinline__ bool skipped_by_gemm(const Group& p) {
  return p.m == 0 || p.n == 0 || p.k == 0;
}

template <typename OffsT, typename Writer>
__global__ void fill_group_arguments(
    Geometry geo, const OffsT* offs, Writer write) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       g < geo.num_groups; g += step) {
    write(g, group_problem(geo, offs, g));
  }
}

// Enqueues the fill on the current stream. Returns false if the launch
// failed; raising is left to the host-compiled caller.
template <typename Writer>
bool launch_fill_group_arguments(const LaunchArgs& args, const Writer& write) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t groups = args.geo.num_groups;
  // Within the SM carveout like every other kernel of the call.
  const int blocks = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>({(groups + kFillThreads - 1) / kFillThreads,
                            kMaxFillBlocks, args.sm_limit})));
  dispatch_offs(args.offs, [&](auto offs) {
    fill_group_arguments<<<blocks, kFillThreads, 0, stream>>>(
        args.geo, offs, write);
  });
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace at::native::grouped_mm
