// Small kernels that complete what the tensor-core GEMMs leave out: zeros
// past offs[-1] (for the paths without a fill kernel) and the per-group
// bias (bias alone for k = 0 groups).
// Each grid stays within the SM-carveout limit, like the GEMMs.

// CUDA only: ROCm keeps upstream's _grouped_mm (GroupedBlas.cpp calls the
// device-offset path under !USE_ROCM), so the ROCm build's hipified copy of
// this file is empty.
#if !defined(USE_ROCM)

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

#endif  // !defined(USE_ROCM)
