// Small kernels that complete what the tensor-core GEMMs leave out: zeros
// past offs[-1], zeros (plus bias) for k = 0 groups, and the per-group bias.
// Each grid stays within the SM-carveout limit, like the GEMMs.

#include <ATen/native/cuda/GroupedMMFillArguments.cuh>
#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace at::native::grouped_mm {
namespace {

constexpr int kThreads = 256;
// One block per allowed SM (the carveout), as wide as a block goes, so the
// grid still keeps enough stores in flight.
constexpr int kFinishThreads = 1024;

template <typename Out, typename OffsT>
__global__ void zero_tail_kernel(Geometry geo, Out* d, const OffsT* offs) {
  zero_past_last_group(geo, d, offs);
}

// 16 bytes of output, the widest store a thread can issue.
template <typename Out>
struct alignas(16) OutVector {
  static constexpr int kSize = 16 / sizeof(Out);
  Out v[kSize];
};

// Every block takes a share of every group that needs work (a k = 0 group,
// or any group when there is a bias), so the few empty groups of a wgrad are
// zeroed by the whole grid at copy bandwidth. Each block first lists, in
// parallel, which of the next kFinishThreads groups need work: a serial scan
// of the offsets costs one L2 round trip per group (~80 us for 128 groups,
// measured). k = 0 groups get exact zeros (plus bias); other groups get the
// bias added to what the GEMM wrote. With kVectorized, a thread owns 16
// contiguous bytes of a row.
template <typename Out, typename OffsT, bool kVectorized>
__global__ void __launch_bounds__(kFinishThreads) finish_groups_kernel(
    Geometry geo, Out* d, const OffsT* offs, const float* bias) {
  using Vec = OutVector<Out>;
  constexpr int kStep = kVectorized ? Vec::kSize : 1;
  __shared__ int64_t work[kFinishThreads];
  __shared__ int work_count;
  const int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  // work[] holds one entry per thread: launched with kFinishThreads only.
  for (int64_t first = 0; first < geo.num_groups; first += kFinishThreads) {
    if (threadIdx.x == 0) {
      work_count = 0;
    }
    __syncthreads();
    const int64_t mine = first + threadIdx.x;
    if (mine < geo.num_groups &&
        (bias != nullptr || group_problem(geo, offs, mine).k == 0)) {
      work[atomicAdd(&work_count, 1)] = mine;  // order does not matter
    }
    __syncthreads();
    const int count = work_count;
    for (int w = 0; w < count; ++w) {
      const int64_t g = work[w];
      const Group p = group_problem(geo, offs, g);
      const bool zero = p.k == 0;
      const float* bias_row = bias == nullptr ? nullptr : bias + g * geo.n;
      // Chunks per row fit in 32 bits (n < 2^31); the flat index may not.
      const uint32_t row_chunks = static_cast<uint32_t>(p.n / kStep);
      const int64_t chunks = p.m * row_chunks;
      for (int64_t i = thread; i < chunks; i += threads) {
        const int64_t r = i / row_chunks;
        const int64_t c = int64_t(i - r * row_chunks) * kStep;
        Out* row = d + p.d_offset + r * geo.d.row;
        if constexpr (kVectorized) {
          Vec* slot = reinterpret_cast<Vec*>(row + c);
          Vec out = zero ? Vec{} : *slot;
#pragma unroll
          for (int e = 0; e < Vec::kSize; ++e) {
            float v = zero ? 0.f : static_cast<float>(out.v[e]);
            if (bias_row != nullptr) {
              v += bias_row[c + e];
            }
            out.v[e] = static_cast<Out>(v);
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
    __syncthreads();  // the list is rebuilt for the next kFinishThreads groups
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
  // Never more blocks than the SM carveout allows: this kernel, like the
  // GEMMs, must leave k SMs to the collective running beside it.
  const dim3 grid(static_cast<unsigned>(args.sm_limit));
  const float* bias =
      args.bias.defined() ? args.bias.const_data_ptr<float>() : nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, args.out.scalar_type(), "grouped_mm_finish", [&] {
        scalar_t* d = args.out.mutable_data_ptr<scalar_t>();
        // Vector stores need unit column stride and 16-byte aligned rows
        // and group starts (d_offset is a multiple of row or group stride;
        // column groups start anywhere, so they take the scalar path).
        const int64_t vec = 16 / sizeof(scalar_t);
        const bool vectorized = args.geo.grouped != GroupedDim::kCols &&
            args.geo.d.col == 1 &&
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
