#pragma once

// The one kernel that turns device offsets into per-group GEMM arguments for
// the tensor-core paths (SM80 and SM90). Each path supplies a writer that
// stores one group's problem in its library's format; which rows, columns
// and base offsets a group gets is decided only by group_problem().

#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace at::native::grouped_mm {

constexpr int kFillThreads = 256;

// Groups that the tensor-core GEMM is told to skip (as an m = 0 problem).
// The libraries leave a k = 0 output unwritten (CUTLASS 3.x) or would spend
// a tile on it, so launch_finish_groups writes those zeros instead.
__device__ __forceinline__ bool skipped_by_gemm(const Group& p) {
  return p.m == 0 || p.n == 0 || p.k == 0;
}

// Zeros what no group owns: rows (or columns) [offs[-1], extent) of a row-
// (column-) grouped output, grid-stride over every thread of the launch.
// Out may be any type whose zero is all-zero bytes of its size.
template <typename Out, typename OffsT>
__device__ __forceinline__ void zero_past_last_group(
    const Geometry& geo, Out* d, const OffsT* offs) {
  if (geo.grouped != GroupedDim::kRows && geo.grouped != GroupedDim::kCols) {
    return;
  }
  const int64_t end = clamped_total(offs, geo.num_groups, geo.extent);
  const int64_t tail = geo.extent - end;
  const bool rows = geo.grouped == GroupedDim::kRows;
  const int64_t count = rows ? tail * geo.n : geo.m * tail;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = rows ? end + i / geo.n : i / tail;
    const int64_t c = rows ? i % geo.n : end + i % tail;
    d[r * geo.d.row + c * geo.d.col] = Out(0);
  }
}

// Also zeros the output past the last group (`tail`, the output viewed as
// units of its element size), which saves the separate tail kernel's launch
// on the tensor-core paths. Writer::prepare runs first in every block, with
// every thread, so a writer may place groups by a view of the whole call.
template <typename OffsT, typename Writer, typename Unit>
__global__ void fill_group_arguments(
    Geometry geo, const OffsT* offs, Writer writer, Unit* tail) {
  Writer write = writer;
  write.prepare(geo, offs);
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       g < geo.num_groups; g += step) {
    write(g, group_problem(geo, offs, g));
  }
  zero_past_last_group(geo, tail, offs);
}

// Enqueues the fill (and the zeroing past the last group) on the current
// stream. Returns false if the launch failed; raising is left to the
// host-compiled caller. Writer::d points at the output, so its element type
// gives the zeroing's store unit at compile time.
template <typename Writer>
bool launch_fill_group_arguments(const LaunchArgs& args, const Writer& write) {
  using Out = std::remove_pointer_t<decltype(Writer::d)>;
  static_assert(sizeof(Out) == 2 || sizeof(Out) == 4,
                "tensor-core outputs are bf16, fp16 or fp32");
  using Unit = std::conditional_t<sizeof(Out) == 2, uint16_t, uint32_t>;
  const auto stream = at::cuda::getCurrentCUDAStream();
  // The tail's size is device-only, so the grid is sized for any tail:
  // one block per allowed SM (the carveout), like every kernel of the call.
  const int blocks =
      static_cast<int>(std::max<int64_t>(1, args.sm_limit));
  auto* tail = static_cast<Unit*>(args.out.mutable_data_ptr());
  dispatch_offs(args.offs, [&](auto offs) {
    fill_group_arguments<<<blocks, kFillThreads, 0, stream>>>(
        args.geo, offs, write, tail);
  });
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace at::native::grouped_mm
