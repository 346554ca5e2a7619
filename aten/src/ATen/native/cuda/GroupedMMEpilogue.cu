// Small kernels that complete what the tensor-core GEMMs leave out: zeros
// past offs[-1], zeros (plus bias) for k = 0 groups, and the per-group bias.
// Each grid stays within the SM-carveout limit, like the GEMMs.

#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace at::native::grouped_mm {
namespace {

constexpr int kThreads = 256;

template <typename Out, typename OffsT>
__global__ void zero_tail_kernel(Geometry geo, Out* d, const OffsT* offs) {
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

// Groups along y, elements along x. k = 0 groups get exact zeros (plus
// bias); other groups get the bias added to what the GEMM wrote.
template <typename Out, typename OffsT>
__global__ void finish_groups_kernel(
    Geometry geo, Out* d, const OffsT* offs, const float* bias) {
  for (int64_t g = blockIdx.y; g < geo.num_groups; g += gridDim.y) {
    const Group p = group_problem(geo, offs, g);
    const bool zero = p.k == 0;
    if (!zero && bias == nullptr) {
      continue;
    }
    const int64_t count = p.m * p.n;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
         i < count; i += int64_t(gridDim.x) * blockDim.x) {
      const int64_t r = i / p.n;
      const int64_t c = i % p.n;
      Out* e = d + p.d_offset + r * geo.d.row + c * geo.d.col;
      float v = zero ? 0.f : static_cast<float>(*e);
      if (bias != nullptr) {
        v += bias[g * geo.n + c];
      }
      *e = static_cast<Out>(v);
    }
  }
}

template <typename Fn>
void dispatch_offs(const Tensor& offs, Fn&& fn) {
  if (offs.defined() && offs.scalar_type() == kLong) {
    fn(offs.const_data_ptr<int64_t>());
  } else {
    fn(offs.defined() ? offs.const_data_ptr<int32_t>() : nullptr);
  }
}

}  // namespace

void launch_zero_tail(const LaunchArgs& args) {
  if (args.geo.grouped != GroupedDim::kRows &&
      args.geo.grouped != GroupedDim::kCols) {
    return;
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid(static_cast<unsigned>(args.sm_limit));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, args.out.scalar_type(), "grouped_mm_zero_tail", [&] {
        dispatch_offs(args.offs, [&](auto offs) {
          zero_tail_kernel<<<grid, kThreads, 0, stream>>>(
              args.geo, args.out.mutable_data_ptr<scalar_t>(), offs);
        });
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_finish_groups(const LaunchArgs& args) {
  const bool has_k0_groups = args.geo.grouped == GroupedDim::kReduction;
  if (!has_k0_groups && !args.bias.defined()) {
    return;
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t y = std::max<int64_t>(
      1, std::min<int64_t>({args.geo.num_groups, args.sm_limit, 65535}));
  const dim3 grid(
      static_cast<unsigned>(std::max<int64_t>(1, args.sm_limit / y)),
      static_cast<unsigned>(y));
  const float* bias =
      args.bias.defined() ? args.bias.const_data_ptr<float>() : nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, args.out.scalar_type(), "grouped_mm_finish", [&] {
        dispatch_offs(args.offs, [&](auto offs) {
          finish_groups_kernel<<<grid, kThreads, 0, stream>>>(
              args.geo, args.out.mutable_data_ptr<scalar_t>(), offs, bias);
        });
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace at::native::grouped_mm
