// Generic grouped GEMM: any dtype, stride, size and group count, fp32 FMA
// math. It is the exact-fp32 path and the fallback for operands the tensor
// core kernels cannot take (odd strides, unaligned sizes). A persistent grid
// of at most sm_limit blocks walks every group's tiles, so it honours the SM
// carveout and needs no host-side group sizes.

// CUDA only: ROCm keeps upstream's _grouped_mm (GroupedBlas.cpp calls the
// device-offset path under !USE_ROCM), so the ROCm build's hipified copy of
// this file is empty.
#if !defined(USE_ROCM)

#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

namespace at::native::grouped_mm {
namespace {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kTileK = 16;
constexpr int kThreads = 256;  // 16 x 16 threads, 4 x 4 outputs each
constexpr int kPerThread = 4;

template <typename In>
struct TileBuffers {
  float a[kTileK][kTileM + 4];
  float b[kTileK][kTileN + 4];
};

template <typename In>
__device__ void load_tiles(
    TileBuffers<In>& s, const Geometry& geo, const Group& p, const In* a,
    const In* b, int64_t m0, int64_t n0, int64_t k0) {
  for (int i = threadIdx.x; i < kTileM * kTileK; i += kThreads) {
    const int r = i / kTileK;
    const int c = i % kTileK;
    const int64_t gm = m0 + r;
    const int64_t gk = k0 + c;
    s.a[c][r] = (gm < p.m && gk < p.k)
        ? static_cast<float>(
              a[p.a_offset + gm * geo.a.row + gk * geo.a.col])
        : 0.f;
  }
  for (int i = threadIdx.x; i < kTileK * kTileN; i += kThreads) {
    const int r = i / kTileN;
    const int c = i % kTileN;
    const int64_t gk = k0 + r;
    const int64_t gn = n0 + c;
    s.b[r][c] = (gk < p.k && gn < p.n)
        ? static_cast<float>(
              b[p.b_offset + gk * geo.b.row + gn * geo.b.col])
        : 0.f;
  }
}

template <typename In, typename Out>
__device__ void compute_tile(
    TileBuffers<In>& s, const Geometry& geo, const Group& p, int64_t g,
    const In* a, const In* b, Out* d, const float* bias, int64_t m0,
    int64_t n0) {
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
  float acc[kPerThread][kPerThread] = {};
  for (int64_t k0 = 0; k0 < p.k; k0 += kTileK) {
    load_tiles(s, geo, p, a, b, m0, n0, k0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float af[kPerThread];
      float bf[kPerThread];
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        af[i] = s.a[kk][ty * kPerThread + i];
        bf[i] = s.b[kk][tx * kPerThread + i];
      }
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
          acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int64_t gm = m0 + ty * kPerThread + i;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t gn = n0 + tx * kPerThread + j;
      if (gm < p.m && gn < p.n) {
        const float v =
            acc[i][j] + (bias != nullptr ? bias[g * geo.n + gn] : 0.f);
        d[p.d_offset + gm * geo.d.row + gn * geo.d.col] = static_cast<Out>(v);
      }
    }
  }
}

template <typename In, typename Out, typename OffsT>
__global__ void __launch_bounds__(kThreads) generic_grouped_mm_kernel(
    Geometry geo, const In* a, const In* b, Out* d, const OffsT* offs,
    const float* bias) {
  __shared__ TileBuffers<In> smem;
  // Tiles are numbered across groups in order; block i takes every
  // gridDim.x-th tile, so the work splits evenly without a prefix sum.
  int64_t tile_base = 0;
  for (int64_t g = 0; g < geo.num_groups; ++g) {
    const Group p = group_problem(geo, offs, g);
    const int64_t tiles_n = (p.n + kTileN - 1) / kTileN;
    const int64_t tiles = ((p.m + kTileM - 1) / kTileM) * tiles_n;
    const int64_t grid = gridDim.x;
    int64_t t = (static_cast<int64_t>(blockIdx.x) - tile_base % grid + grid)
        % grid;
    for (; t < tiles; t += grid) {
      compute_tile(smem, geo, p, g, a, b, d, bias, (t / tiles_n) * kTileM,
                   (t % tiles_n) * kTileN);
    }
    tile_base += tiles;
  }
}

template <typename In, typename Out>
void launch_generic_typed(const LaunchArgs& args) {
  const float* bias =
      args.bias.defined() ? args.bias.const_data_ptr<float>() : nullptr;
  const auto stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid(static_cast<unsigned>(args.sm_limit));
  dispatch_offs(args.offs, [&](auto offs) {
    using OffsT = std::remove_const_t<std::remove_pointer_t<decltype(offs)>>;
    generic_grouped_mm_kernel<In, Out, OffsT><<<grid, kThreads, 0, stream>>>(
        args.geo, args.a.const_data_ptr<In>(), args.b.const_data_ptr<In>(),
        args.out.mutable_data_ptr<Out>(), offs, bias);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void launch_generic_grouped_mm(const LaunchArgs& args) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, args.a.scalar_type(), "grouped_mm_generic", [&] {
        using In = scalar_t;
        if (args.out.scalar_type() == args.a.scalar_type()) {
          launch_generic_typed<In, In>(args);
        } else {
          launch_generic_typed<In, float>(args);
        }
      });
}

}  // namespace at::native::grouped_mm

#endif  // !defined(USE_ROCM)
