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
constexpr int kFinishThreads = 512;

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

// 16 bytes of output, the widest store a thread can issue.
template <typename Out>
struct alignas(16) OutVector {
  static constexpr int kSize = 16 / sizeof(Out);
  Out v[kSize];
};

// Groups along y, rows along x, columns across the threads. k = 0 groups
// get exact zeros (plus bias); other groups get the bias added to what the
// GEMM wrote. Contiguous rows are written 16 bytes at a time: zeroing the
// empty groups of a wgrad writes gigabytes, so this runs at copy bandwidth.
template <typename Out, typename OffsT, bool kVectorized>
__global__ void finish_groups_kernel(
    Geometry geo, Out* d, const OffsT* offs, const float* bias) {
  using Vec = OutVector<Out>;
  constexpr int kStep = kVectorized ? Vec::kSize : 1;
  for (int64_t g = blockIdx.y; g < geo.num_groups; g += gridDim.y) {
    const Group p = group_problem(geo, offs, g);
    const bool zero = p.k == 0;
    if (!zero && bias == nullptr) {
      continue;
    }
    const float* bias_row = bias == nullptr ? nullptr : bias + g * geo.n;
    for (int64_t r = blockIdx.x; r < p.m; r += gridDim.x) {
      Out* row = d + p.d_offset + r * geo.d.row;
      for (int64_t c = int64_t(threadIdx.x) * kStep; c < p.n;
           c += int64_t(blockDim.x) * kStep) {
        if constexpr (kVectorized) {
          Vec* slot = reinterpret_cast<Vec*>(row + c);
          Vec out = zero ? Vec{} : *slot;
#pragma unroll
          for (int i = 0; i < Vec::kSize; ++i) {
            float v = zero ? 0.f : static_cast<float>(out.v[i]);
            if (bias_row != nullptr) {
              v += bias_row[c + i];
            }
            out.v[i] = static_cast<Out>(v);
          }
          *slot = out;
        } else {
          Out* e = row + c * geo.d.col;
          float v = zero ? 0.f : static_cast<float>(*e);
          if (bias_row != nullptr) {
            v += bias_row[c];
          }
          *e = static_cast<Out>(v);
        }
      }
    }
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
  // k = 0 problems: empty groups of a 2d x 2d call, or K = 0 in any layout.
  const bool may_have_k0 =
      args.geo.grouped == GroupedDim::kReduction || args.geo.k == 0;
  if (!may_have_k0 && !args.bias.defined()) {
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
        scalar_t* d = args.out.mutable_data_ptr<scalar_t>();
        // Vector stores need unit column stride and 16-byte aligned rows
        // and group starts (d_offset is a multiple of row or group stride).
        const int64_t vec = 16 / sizeof(scalar_t);
        const bool vectorized = args.geo.d.col == 1 &&
            args.geo.n % vec == 0 && args.geo.d.row % vec == 0 &&
            args.geo.d.group % vec == 0 &&
            reinterpret_cast<uintptr_t>(d) % 16 == 0;
        dispatch_offs(args.offs, [&](auto offs) {
          using OffsT =
              std::remove_const_t<std::remove_pointer_t<decltype(offs)>>;
          if (vectorized) {
            finish_groups_kernel<scalar_t, OffsT, true>
                <<<grid, kFinishThreads, 0, stream>>>(args.geo, d, offs, bias);
          } else {
            finish_groups_kernel<scalar_t, OffsT, false>
                <<<grid, kFinishThreads, 0, stream>>>(args.geo, d, offs, bias);
          }
        });
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace at::native::grouped_mm
