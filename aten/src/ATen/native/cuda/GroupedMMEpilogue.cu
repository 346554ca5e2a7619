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

// Group that owns output row `row` when rows are grouped: the first g whose
// clamped end is past the row (offsets past the end count as the end).
template <typename OffsT>
__device__ int64_t group_of_row(const Geometry& geo, const OffsT* offs,
                                int64_t row) {
  int64_t lo = 0;
  int64_t hi = geo.num_groups;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (clamp_offset(offs, mid, 0, geo.extent) > row) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// Completes the output after a tensor-core GEMM, 16 bytes (or one element)
// per step, over a flat index of (output row, column chunk) so every block
// has work even when only a few groups need it. k = 0 problems get exact
// zeros (plus bias); others get the bias added to what the GEMM wrote.
template <typename Out, typename OffsT, bool kVectorized>
__global__ void finish_groups_kernel(
    Geometry geo, Out* d, const OffsT* offs, const float* bias) {
  using Vec = OutVector<Out>;
  constexpr int kStep = kVectorized ? Vec::kSize : 1;
  const bool rows_grouped = geo.grouped == GroupedDim::kRows;
  const int64_t chunks_per_row = (geo.n + kStep - 1) / kStep;
  const int64_t rows = rows_grouped ? geo.extent : geo.num_groups * geo.m;
  const int64_t total = rows * chunks_per_row;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = i / chunks_per_row;
    const int64_t c = (i % chunks_per_row) * kStep;
    int64_t g;
    Out* row;
    bool zero;
    if (rows_grouped) {
      g = group_of_row(geo, offs, v);
      if (g >= geo.num_groups) {
        continue;  // the tail past offs[-1]: zero_tail_kernel's job
      }
      row = d + v * geo.d.row;
      zero = geo.k == 0;
    } else {
      g = v / geo.m;
      const Group p = group_problem(geo, offs, g);
      zero = p.k == 0;
      row = d + p.d_offset + (v % geo.m) * geo.d.row;
    }
    if (!zero && bias == nullptr) {
      continue;
    }
    const float* bias_row = bias == nullptr ? nullptr : bias + g * geo.n;
    if constexpr (kVectorized) {
      Vec* slot = reinterpret_cast<Vec*>(row + c);
      Vec out = zero ? Vec{} : *slot;
#pragma unroll
      for (int j = 0; j < Vec::kSize; ++j) {
        float x = zero ? 0.f : static_cast<float>(out.v[j]);
        if (bias_row != nullptr) {
          x += bias_row[c + j];
        }
        out.v[j] = static_cast<Out>(x);
      }
      *slot = out;
    } else {
      Out* e = row + c * geo.d.col;
      float x = zero ? 0.f : static_cast<float>(*e);
      if (bias_row != nullptr) {
        x += bias_row[c];
      }
      *e = static_cast<Out>(x);
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
  const bool may_have_k0 =
      args.geo.grouped == GroupedDim::kReduction || args.geo.k == 0;
  if (!may_have_k0 && !args.bias.defined()) {
    return;
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid(static_cast<unsigned>(args.sm_limit));
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
          if (vectorized) {
            finish_groups_kernel<scalar_t, std::remove_const_t<
                std::remove_pointer_t<decltype(offs)>>, true>
                <<<grid, kFinishThreads, 0, stream>>>(args.geo, d, offs, bias);
          } else {
            finish_groups_kernel<scalar_t, std::remove_const_t<
                std::remove_pointer_t<decltype(offs)>>, false>
                <<<grid, kFinishThreads, 0, stream>>>(args.geo, d, offs, bias);
          }
        });
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace at::native::grouped_mm
