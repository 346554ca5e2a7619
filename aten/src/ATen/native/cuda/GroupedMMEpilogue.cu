// Small kernels that complete what the tensor-core GEMMs leave out: zeros
// past offs[-1] (for the paths without a fill kernel) and the per-group
// bias (bias alone for k = 0 groups).
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

// Adds the bias to every group; a k = 0 group (which the GEMM skipped) gets
// the bias alone. Every block takes a share of every group, so the whole
// grid writes at copy bandwidth. With kVectorized, a thread owns 16
// contiguous bytes of a row.
template <typename Out, bool kVectorized>
__device__ void add_group_bias(
    const Geometry& geo, Out* d, const Group& p, const float* bias_row) {
  using Vec = OutVector<Out>;
  constexpr int kStep = kVectorized ? Vec::kSize : 1;
  const int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  const bool zero = p.k == 0;
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
        const float v = zero ? 0.f : static_cast<float>(out.v[e]);
        out.v[e] = static_cast<Out>(v + bias_row[c + e]);
      }
      *slot = out;
    } else {
      Out* e = row + c * geo.d.col;
      const float v = zero ? 0.f : static_cast<float>(*e);
      *e = static_cast<Out>(v + bias_row[c]);
    }
  }
}

template <typename Out, typename OffsT, bool kVectorized>
__global__ void __launch_bounds__(kFinishThreads) finish_groups_kernel(
    Geometry geo, Out* d, const OffsT* offs, const float* bias) {
  for_each_group_where<kFinishThreads>(
      geo, offs, [](const Group&) { return true; },
      [&](int64_t g, const Group& p) {
        add_group_bias<Out, kVectorized>(geo, d, p, bias + g * geo.n);
      });
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
  if (!args.bias.defined()) {
    return;  // k = 0 zeros, if any, came from the fill
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  // Never more blocks than the SM carveout allows: this kernel, like the
  // GEMMs, must leave k SMs to the collective running beside it.
  const dim3 grid(static_cast<unsigned>(args.sm_limit));
  const float* bias = args.bias.const_data_ptr<float>();
  const bool vectorized = output_takes_vector_stores(args);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, args.out.scalar_type(), "grouped_mm_finish", [&] {
        scalar_t* d = args.out.mutable_data_ptr<scalar_t>();
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
