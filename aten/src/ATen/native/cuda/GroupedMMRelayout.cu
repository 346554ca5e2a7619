// The copies a grouped-mm call makes (an operand re-laid out for a
// tensor-core path, the transposed 3d x 2d result, the float32 bias), in a
// grid within the SM carveout. torch's copy kernel sizes its grid by the
// element count, so under a carveout it would take the SMs left to the
// collective running beside the GEMM. A transposing copy runs here even
// without a carveout: torch's copy then reads or writes across the
// contiguous dimension, several times slower. Contiguous to contiguous (a
// dtype change, e.g. the backward's gradient cast) takes a flat vectorised
// copy instead of the tile.
// The K-major copies with padded group starts that TF32 on Hopper needs
// when the groups split K (copy_k_groups_padded) take a 4 x 4 register
// transpose kernel in a weight gradient's layout, the same kernel
// otherwise.
// Plain CUDA, no CUTLASS: the ROCm build compiles its hipified copy too, for
// the backward's kernels (GroupGradCast.cpp, GroupColumnSums.cu).

#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMOperandLayout.h>

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
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

// Where an element lands in dst: at its own (row, col), for a plain copy.
struct SameIndex {
  static constexpr bool kMoves = false;
};

template <typename In, typename Out, typename DstIndex>
__global__ void __launch_bounds__(kThreads, 2) relayout_kernel(
    CopyGeometry geo, const In* __restrict__ src, Out* __restrict__ dst,
    DstIndex dst_index) {
  // One padding column: threads walking the tile's rows hit other banks.
  __shared__ Out tile[kTile][kTile + 1];
  // The destination index of each of the tile's rows (or columns) that
  // dst_index moves, looked up once per tile.
  __shared__ int64_t moved[DstIndex::kMoves ? kTile : 1];
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
    if constexpr (DstIndex::kMoves) {
      if (threadIdx.x < kTile) {
        const int64_t first = dst_index.along_rows ? r0 : c0;
        const int64_t size = dst_index.along_rows ? geo.rows : geo.cols;
        const int64_t i = first + threadIdx.x;
        moved[threadIdx.x] = i < size ? dst_index(i) : -1;
      }
    }
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
        int64_t dr = r0 + tr;
        int64_t dc = c0 + tc;
        if constexpr (DstIndex::kMoves) {
          (dst_index.along_rows ? dr : dc) =
              moved[dst_index.along_rows ? tr : tc];
        }
        if (dr >= 0 && dc >= 0) {
          d[dr * geo.dst.row + dc * geo.dst.col] = tile[tr][tc];
        }
      }
    }
    __syncthreads();  // the tile (and moved) are refilled for the next t
  }
}

// Both sides contiguous (no transpose, no gaps): a flat grid-stride copy,
// 16 bytes of src per load and kFlatUnroll loads in flight per thread. The
// tile kernel above moves single elements through shared memory, at a
// quarter of torch's copy's speed on a same-layout cast.
constexpr int kFlatUnroll = 4;

template <typename T, int kCount>
struct alignas(sizeof(T) * kCount) Vec {
  T v[kCount];
};

template <typename Out, typename In, int kCount>
__device__ __forceinline__ Vec<Out, kCount> cast_vec(const Vec<In, kCount>& in) {
  Vec<Out, kCount> out;
#pragma unroll
  for (int j = 0; j < kCount; ++j) {
    out.v[j] = static_cast<Out>(in.v[j]);
  }
  return out;
}

template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads) flat_copy_kernel(
    const In* __restrict__ src, Out* __restrict__ dst, int64_t n,
    bool vectors) {
  constexpr int kCount = 16 / sizeof(In);
  using InVec = Vec<In, kCount>;
  using OutVec = Vec<Out, kCount>;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // Vectors only where both pointers are aligned to theirs (the host
  // checked); the elements past the last whole vector, one by one.
  const int64_t vecs = vectors ? n / kCount : 0;
  const InVec* src_vec = reinterpret_cast<const InVec*>(src);
  OutVec* dst_vec = reinterpret_cast<OutVec*>(dst);
  int64_t i = first;
  for (; i + (kFlatUnroll - 1) * stride < vecs; i += kFlatUnroll * stride) {
    InVec in[kFlatUnroll];
#pragma unroll
    for (int u = 0; u < kFlatUnroll; ++u) {
      in[u] = src_vec[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kFlatUnroll; ++u) {
      dst_vec[i + u * stride] = cast_vec<Out>(in[u]);
    }
  }
  for (; i < vecs; i += stride) {
    dst_vec[i] = cast_vec<Out>(src_vec[i]);
  }
  for (int64_t e = vecs * kCount + first; e < n; e += stride) {
    dst[e] = static_cast<Out>(src[e]);
  }
}

// A persistent grid: one CTA per tile, at most max_blocks.
dim3 persistent_grid(int64_t tiles, int64_t max_blocks) {
  return dim3(static_cast<unsigned>(
      std::max<int64_t>(1, std::min(tiles, max_blocks))));
}

// A 1-D tensor (offs) as one row.
OperandStrides strides_of(const Tensor& t) {
  if (t.dim() == 1) {
    return {0, 0, t.stride(0)};
  }
  return operand_strides(t);
}

// max_blocks: the grid's limit (the SM carveout's limit, one block per SM).
// Sizes are src's; dst may be larger when dst_index moves elements.
template <typename In, typename Out, typename DstIndex = SameIndex>
void launch_relayout(
    const Tensor& src, const Tensor& dst, int64_t max_blocks,
    DstIndex dst_index = {}) {
  CopyGeometry geo;
  geo.batches = src.dim() == 3 ? src.size(0) : 1;
  geo.rows = src.dim() == 1 ? 1 : src.size(-2);
  geo.cols = src.size(-1);
  geo.src = strides_of(src);
  geo.dst = strides_of(dst);
  const int64_t tiles = geo.batches * ((geo.rows + kTile - 1) / kTile) *
      ((geo.cols + kTile - 1) / kTile);
  relayout_kernel<In, Out, DstIndex>
      <<<persistent_grid(tiles, max_blocks), kThreads, 0,
         at::cuda::getCurrentCUDAStream()>>>(
          geo, src.const_data_ptr<In>(), dst.mutable_data_ptr<Out>(),
          dst_index);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// copy_within_sm_limit's kernel: the flat copy where both tensors are
// contiguous, the tile kernel otherwise.
template <typename In, typename Out>
void launch_copy(const Tensor& src, const Tensor& dst, int64_t max_blocks) {
  if (!(src.is_contiguous() && dst.is_contiguous())) {
    launch_relayout<In, Out>(src, dst, max_blocks);
    return;
  }
  constexpr int64_t kCount = 16 / sizeof(In);
  const int64_t n = src.numel();
  const auto aligned = [](const void* p, int64_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % uintptr_t(bytes) == 0;
  };
  const bool vectors = aligned(src.const_data_ptr(), 16) &&
      aligned(dst.const_data_ptr(), int64_t(sizeof(Out)) * kCount);
  const int64_t work = vectors ? (n + kCount - 1) / kCount : n;
  flat_copy_kernel<In, Out>
      <<<persistent_grid((work + kThreads - 1) / kThreads, max_blocks),
         kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          src.const_data_ptr<In>(), dst.mutable_data_ptr<Out>(), n, vectors);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

bool carveout_active(int64_t sm_limit) {
  return sm_limit < at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

// Without a carveout, two blocks per SM (2048 threads) keep twice the
// loads in flight; under one, a block per allowed SM bounds the SMs used.
int64_t copy_blocks(int64_t sm_limit) {
  return carveout_active(sm_limit) ? sm_limit : 2 * sm_limit;
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
  const int64_t max_blocks = copy_blocks(sm_limit);
  const ScalarType in = src.scalar_type();
  const ScalarType out = dst.scalar_type();
  const bool narrows_float =
      in == kFloat && (out == kBFloat16 || out == kHalf);
  TORCH_CHECK(
      in == out || out == kFloat || narrows_float,
      "grouped_mm: copy_within_sm_limit: dst must have src's dtype ", in,
      " or float32 (or bfloat16/float16 from float32), got ", out);
  if (narrows_float) {
    // The output gradient of an out_dtype=float32 forward, cast back to
    // the inputs' dtype for the backward's GEMMs.
    AT_DISPATCH_REDUCED_FLOATING_TYPES(out, "grouped_mm_relayout", [&] {
      launch_copy<float, scalar_t>(src, dst, max_blocks);
    });
    return;
  }
  if (in == kInt || in == kLong) {
    TORCH_CHECK(in == out, "grouped_mm: copy_within_sm_limit: dst must ",
                "have src's dtype ", in, ", got ", out);
    AT_DISPATCH_INDEX_TYPES(in, "grouped_mm_relayout", [&] {
      launch_copy<index_t, index_t>(src, dst, max_blocks);
    });
    return;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, in, "grouped_mm_relayout", [&] {
        if (out == in) {
          launch_copy<scalar_t, scalar_t>(src, dst, max_blocks);
        } else {
          launch_copy<scalar_t, float>(src, dst, max_blocks);
        }
      });
}

// The padded-K copies feed only the Hopper TF32 kernels, which ROCm does
// not build; copy_within_sm_limit above is built for ROCm too.
#if !defined(USE_ROCM)

namespace {

// A copy grouped along K (rows when along_rows, else columns) into one
// with padded group starts: index k of group g lands where group_problem
// tells the GEMM to read it, given geo (K-grouped, unit K stride,
// k_group_pad set). The group is found by a binary search of offs; an
// index in no group (at or past offs[-1], or in a gap bad offsets leave)
// maps to -1 and is not written. Nothing reads the unwritten slots, except
// a group that decreasing offsets make overlap another (in bounds; its
// result is unspecified, as with any bad offsets).
template <typename OffsT>
struct PaddedKIndex {
  static constexpr bool kMoves = true;
  bool along_rows;
  const OffsT* offs;
  Geometry geo;
  __device__ int64_t operator()(int64_t k) const {
    int64_t lo = 0;
    int64_t hi = geo.num_groups;
    while (lo < hi) {  // the first group whose end is past k
      const int64_t mid = (lo + hi) / 2;
      if (clamp_offset(offs, mid, 0, geo.extent) > k) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    if (lo == geo.num_groups) {
      return -1;
    }
    const Group p = group_problem(geo, offs, lo);
    if (k < p.start || k >= p.start + p.k) {
      return -1;
    }
    return p.a_offset + (k - p.start);
  }
};

// The geometry PaddedKIndex maps through: only K's grouping and padding
// matter, and K is the unit-stride dimension of the copy.
Geometry padded_k_geometry(int64_t num_groups, int64_t extent, int64_t pad) {
  Geometry geo{};
  geo.num_groups = num_groups;
  geo.grouped = GroupedDim::kReduction;
  geo.extent = extent;
  geo.a = {0, 0, 1};
  geo.k_group_pad = pad;
  return geo;
}

// The padded copy for the layout a weight gradient's operands come in
// (x^T and dy): K strided, the other index (x) contiguous. The tile
// kernel (relayout_kernel) reads and writes one float per thread and
// instruction, too slow for these copies, which are as large as the
// GEMM's operands. This one has no shared memory and no barrier: each
// thread moves a 4 x 4 block, four 16-byte loads from four consecutive
// source K rows, a transpose in registers and four 16-byte stores along K.
// A padded group starts at a multiple of 4 floats, so a quad of padded K
// lies in one group or in a gap. A warp covers 8 K quads by 4 x quads: its
// loads read 64-byte runs and its stores write 128-byte runs, whole
// sectors on both sides. Both are streaming (evict-first): the copies are
// far larger than L2.
constexpr int kQuad = 4;
constexpr int kWarpKQuads = 8;
constexpr int kWarpXQuads = 32 / kWarpKQuads;
constexpr int kGatherThreads = 512;
constexpr int kGatherK = kQuad * kWarpKQuads;
constexpr int kGatherX = kQuad * kWarpXQuads * (kGatherThreads / 32);

struct GatherGeometry {
  int64_t xs;            // the contiguous index's extent
  int64_t src_k_stride;  // elements between consecutive K in src
  int64_t dst_x_stride;  // elements between consecutive x in dst
  int64_t width;         // dst's padded K extent, a multiple of 4
};

// Where padded index kd reads from: source K index k, and the indices its
// group has left from there (run = 0: kd is in a gap).
struct PaddedKSource {
  int64_t k;
  int64_t run;
};

// The last group starting at or before kd, if kd is inside it. Decreasing
// offsets make the starts non-monotonic; the run found then still ends
// inside [0, extent).
template <typename OffsT>
__device__ PaddedKSource padded_k_source(
    const Geometry& geo, const OffsT* offs, int64_t kd) {
  int64_t lo = 0;
  int64_t hi = geo.num_groups;
  while (lo < hi) {  // the first group starting past kd
    const int64_t mid = (lo + hi) / 2;
    if (group_problem(geo, offs, mid).a_offset <= kd) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) {
    return {0, 0};
  }
  const Group p = group_problem(geo, offs, lo - 1);
  const int64_t i = kd - p.a_offset;
  return i < p.k ? PaddedKSource{p.start + i, p.k - i} : PaddedKSource{0, 0};
}

template <typename OffsT>
__global__ void __launch_bounds__(kGatherThreads, 2) padded_k_gather_kernel(
    GatherGeometry gg, const float* __restrict__ src, float* __restrict__ dst,
    const OffsT* offs, Geometry geo) {
  const int lane = threadIdx.x % 32;
  const int kq = lane % kWarpKQuads;
  const int xq = lane / kWarpKQuads + kWarpXQuads * (threadIdx.x / 32);
  const int64_t tiles_x = (gg.xs + kGatherX - 1) / kGatherX;
  const int64_t tiles = (gg.width + kGatherK - 1) / kGatherK * tiles_x;
  int64_t searched_kd = -1;
  PaddedKSource from{0, 0};
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t kd = t / tiles_x * kGatherK + kQuad * kq;
    const int64_t x = t % tiles_x * kGatherX + kQuad * xq;
    if (kd >= gg.width || x >= gg.xs) {
      continue;
    }
    if (kd != searched_kd) {  // a block's next tile may share its K
      searched_kd = kd;
      from = padded_k_source(geo, offs, kd);
    }
    float4 v[kQuad];
#pragma unroll
    for (int i = 0; i < kQuad; ++i) {
      v[i] = i < from.run
          ? __ldcs(reinterpret_cast<const float4*>(
                src + (from.k + i) * gg.src_k_stride + x))
          : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float* d = dst + x * gg.dst_x_stride + kd;
    __stcs(reinterpret_cast<float4*>(d),
           make_float4(v[0].x, v[1].x, v[2].x, v[3].x));
    __stcs(reinterpret_cast<float4*>(d + gg.dst_x_stride),
           make_float4(v[0].y, v[1].y, v[2].y, v[3].y));
    __stcs(reinterpret_cast<float4*>(d + 2 * gg.dst_x_stride),
           make_float4(v[0].z, v[1].z, v[2].z, v[3].z));
    __stcs(reinterpret_cast<float4*>(d + 3 * gg.dst_x_stride),
           make_float4(v[0].w, v[1].w, v[2].w, v[3].w));
  }
}

// The gather kernel's layout: x unit-stride in src, K unit-stride in dst,
// and every 4-float run 16-byte aligned on both sides (src's leading
// dimension is its K stride, dst's its x stride).
bool gather_layout(const Tensor& src, const Tensor& dst, bool k_along_rows,
                   int64_t width) {
  const int k_dim = k_along_rows ? 0 : 1;
  const int x_dim = 1 - k_dim;
  const Major src_major = k_along_rows ? Major::kRow : Major::kCol;
  const Major dst_major = k_along_rows ? Major::kCol : Major::kRow;
  return src.stride(x_dim) == 1 && src.size(x_dim) % 4 == 0 &&
      dst.stride(k_dim) == 1 && width % 4 == 0 &&
      aligned(src, operand_strides(src), src_major, 4) &&
      aligned(dst, operand_strides(dst), dst_major, 4);
}

template <typename OffsT>
void launch_padded_k_gather(
    const Tensor& src, const Tensor& dst, bool k_along_rows, int64_t width,
    int64_t max_blocks, const OffsT* offs, const Geometry& geo) {
  const int k_dim = k_along_rows ? 0 : 1;
  const int x_dim = 1 - k_dim;
  GatherGeometry gg;
  gg.xs = src.size(x_dim);
  gg.src_k_stride = src.stride(k_dim);
  gg.dst_x_stride = dst.stride(x_dim);
  gg.width = width;
  const int64_t tiles = (width + kGatherK - 1) / kGatherK *
      ((gg.xs + kGatherX - 1) / kGatherX);
  padded_k_gather_kernel<OffsT>
      <<<persistent_grid(tiles, max_blocks), kGatherThreads, 0,
         at::cuda::getCurrentCUDAStream()>>>(
          gg, src.const_data_ptr<float>(), dst.mutable_data_ptr<float>(),
          offs, geo);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void copy_k_groups_padded(
    const Tensor& src, const Tensor& dst, const Tensor& offs,
    int64_t num_groups, bool k_along_rows, int64_t pad, int64_t sm_limit) {
  TORCH_CHECK(
      src.dim() == 2 && dst.dim() == 2 && offs.defined(),
      "grouped_mm: copy_k_groups_padded: needs 2-D src and dst and offs, got ",
      src.sizes(), " and ", dst.sizes());
  const int64_t extent = src.size(k_along_rows ? 0 : 1);
  TORCH_CHECK(
      src.scalar_type() == kFloat &&
          dst.scalar_type() == kFloat && pad > 0 &&
          dst.size(k_along_rows ? 0 : 1) ==
              padded_k_extent(extent, num_groups, pad) &&
          dst.size(k_along_rows ? 1 : 0) == src.size(k_along_rows ? 1 : 0),
      "grouped_mm: copy_k_groups_padded: float32 src ", src.sizes(),
      " and dst ", dst.sizes(), " do not match ", num_groups,
      " groups padded to ", pad);
  if (src.numel() == 0) {
    return;
  }
  const int64_t width = dst.size(k_along_rows ? 0 : 1);
  const Geometry geo = padded_k_geometry(num_groups, extent, pad);
  const bool gather = gather_layout(src, dst, k_along_rows, width);
  dispatch_offs(offs, [&](auto offs_data) {
    using OffsT = std::remove_const_t<
        std::remove_pointer_t<decltype(offs_data)>>;
    if (gather) {
      launch_padded_k_gather(src, dst, k_along_rows, width,
                             copy_blocks(sm_limit), offs_data, geo);
    } else {
      launch_relayout<float, float>(
          src, dst, copy_blocks(sm_limit),
          PaddedKIndex<OffsT>{k_along_rows, offs_data, geo});
    }
  });
}

#endif  // !defined(USE_ROCM)

}  // namespace at::native::grouped_mm
