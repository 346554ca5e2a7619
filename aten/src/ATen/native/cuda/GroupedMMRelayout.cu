// The copies a grouped-mm call makes (an operand re-laid out for a
// tensor-core path, the transposed 3d x 2d result, the float32 bias), in a
// grid within the SM carveout. torch's copy kernel sizes its grid by the
// element count (512 CTAs for a 256 x 1024 bf16 operand on an H200), so
// under a carveout it would take the SMs left to the collective running
// beside the GEMM. A transposing copy runs here even without a carveout:
// torch's copy then reads or writes across the contiguous dimension
// (15.4 ms for gpt_oss_120b_w13's 8.5 GB float32 weights on the H200).

#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <type_traits>

namespace at::native::grouped_mm {
namespace {

// A tile passes through shared memory, so that both the reads and the
// writes run along the contiguous dimension of their own tensor (a
// transpose is coalesced on both sides). The grid holds one 1024-thread
// block per allowed SM, each with kPasses loads per thread in flight.
constexpr int kTile = 64;
constexpr int kTileLines = 16;  // lines of the tile one pass covers
constexpr int kThreads = kTile * kTileLines;
constexpr int kPasses = kTile / kTileLines;

// Sizes of the (batched) matrices and the element strides of both sides.
struct CopyGeometry {
  int64_t batches;
  int64_t rows;
  int64_t cols;
  OperandStrides src;
  OperandStrides dst;
};

// Threads walk columns unless rows are the contiguous dimension.
__host__ __device__ inline bool cols_fast(const OperandStrides& s) {
  return s.col == 1 || s.row != 1;
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads, 2) relayout_kernel(
    CopyGeometry geo, const In* __restrict__ src, Out* __restrict__ dst) {
  // One padding column: threads walking the tile's rows hit other banks.
  __shared__ Out tile[kTile][kTile + 1];
  const bool src_cols_fast = cols_fast(geo.src);
  const bool dst_cols_fast = cols_fast(geo.dst);
  const int lane = threadIdx.x % kTile;
  const int line = threadIdx.x / kTile;
  const int64_t tiles_r = (geo.rows + kTile - 1) / kTile;
  const int64_t tiles_c = (geo.cols + kTile - 1) / kTile;
  const int64_t tiles = geo.batches * tiles_r * tiles_c;
  // Persistent: block i copies every gridDim.x-th tile.
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t batch = t / (tiles_r * tiles_c);
    const int64_t in_batch = t % (tiles_r * tiles_c);
    const int64_t r0 = (in_batch / tiles_c) * kTile;
    const int64_t c0 = (in_batch % tiles_c) * kTile;
    const In* s = src + batch * geo.src.group;
    Out* d = dst + batch * geo.dst.group;
    // All loads of a pass are issued before any lands in shared memory.
    Out staged[kPasses]{};
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int i = line + p * kTileLines;
      const int tr = src_cols_fast ? i : lane;
      const int tc = src_cols_fast ? lane : i;
      if (r0 + tr < geo.rows && c0 + tc < geo.cols) {
        staged[p] = static_cast<Out>(
            s[(r0 + tr) * geo.src.row + (c0 + tc) * geo.src.col]);
      }
    }
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int i = line + p * kTileLines;
      tile[src_cols_fast ? i : lane][src_cols_fast ? lane : i] = staged[p];
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int i = line + p * kTileLines;
      const int tr = dst_cols_fast ? i : lane;
      const int tc = dst_cols_fast ? lane : i;
      if (r0 + tr < geo.rows && c0 + tc < geo.cols) {
        d[(r0 + tr) * geo.dst.row + (c0 + tc) * geo.dst.col] = tile[tr][tc];
      }
    }
    __syncthreads();  // the tile is refilled for the next t
  }
}

// A 1-D tensor (offs) as one row.
OperandStrides strides_of(const Tensor& t) {
  if (t.dim() == 1) {
    return {0, 0, t.stride(0)};
  }
  return operand_strides(t);
}

// max_blocks: the grid's limit (the SM carveout's limit, one block per SM).
template <typename In, typename Out>
void launch_relayout(
    const Tensor& src, const Tensor& dst, int64_t max_blocks) {
  CopyGeometry geo;
  geo.batches = src.dim() == 3 ? src.size(0) : 1;
  geo.rows = src.dim() == 1 ? 1 : src.size(-2);
  geo.cols = src.size(-1);
  geo.src = strides_of(src);
  geo.dst = strides_of(dst);
  const int64_t tiles = geo.batches * ((geo.rows + kTile - 1) / kTile) *
      ((geo.cols + kTile - 1) / kTile);
  const dim3 grid(
      static_cast<unsigned>(std::max<int64_t>(1, std::min(tiles, max_blocks))));
  relayout_kernel<In, Out>
      <<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          geo, src.const_data_ptr<In>(), dst.mutable_data_ptr<Out>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

bool carveout_active(int64_t sm_limit) {
  return sm_limit < at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

}  // namespace

void copy_within_sm_limit(
    const Tensor& src, const Tensor& dst, int64_t sm_limit) {
  TORCH_CHECK(
      src.sizes() == dst.sizes() && src.dim() >= 1 && src.dim() <= 3,
      "grouped_mm: copy_within_sm_limit: src ", src.sizes(), " and dst ",
      dst.sizes(), " must have the same 1-D, 2-D or 3-D sizes");
  if (src.numel() == 0) {
    return;
  }
  const bool carveout = carveout_active(sm_limit);
  if (!carveout && cols_fast(strides_of(src)) == cols_fast(strides_of(dst))) {
    // No carveout and no transpose: torch's copy is the tuned one
    // (vectorised, many CTAs per SM).
    dst.copy_(src);
    return;
  }
  // Without a carveout, two blocks per SM (2048 threads) keep twice the
  // loads in flight; under one, a block per allowed SM bounds the SMs used.
  const int64_t max_blocks = carveout ? sm_limit : 2 * sm_limit;
  const ScalarType in = src.scalar_type();
  const ScalarType out = dst.scalar_type();
  TORCH_CHECK(
      in == out || out == kFloat,
      "grouped_mm: copy_within_sm_limit: dst must have src's dtype ", in,
      " or float32, got ", out);
  if (in == kInt || in == kLong) {
    TORCH_CHECK(in == out, "grouped_mm: copy_within_sm_limit: dst must ",
                "have src's dtype ", in, ", got ", out);
    AT_DISPATCH_INDEX_TYPES(in, "grouped_mm_relayout", [&] {
      launch_relayout<index_t, index_t>(src, dst, max_blocks);
    });
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, in, "grouped_mm_relayout", [&] {
        if (out == in) {
          launch_relayout<scalar_t, scalar_t>(src, dst, max_blocks);
        } else {
          launch_relayout<scalar_t, float>(src, dst, max_blocks);
        }
      });
}

}  // namespace at::native::grouped_mm
