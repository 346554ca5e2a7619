// The bias gradient of _grouped_mm on CUDA: per-group column sums of the
// output gradient, (sum M, N) with device offsets or (G, M, N), into (G, N).
// One kernel reads grad once; its grid never exceeds the SM-carveout limit,
// so a backward overlapped with a collective leaves it its SMs. The sums
// are exact float32 (float64 for float64) whatever TF32 allows, and each
// element is added in a fixed order: the result is deterministic.
//
// Two ways to split the work (OVERLAP_OPS_COLUMN_SUMS_SPLIT):
// - chunks (default): a warp sums a fixed number of rows (a chunk of the
//   whole row range, whatever its groups) for one slab of columns. A group
//   inside one chunk is written whole; a group across chunks leaves one
//   partial per chunk, added in chunk order by a second kernel. No barrier
//   and no shared memory, and the same work per warp however skewed the
//   groups are.
// - blocks: a block sums one group's rows (or a part of them) for a slab,
//   its warps on different rows, then reduces through shared memory. Its
//   two barriers and the reduction cost as much as the loads when groups
//   are short (gpt_oss_120b_w13's 256 rows; the decode shapes).

#include <ATen/native/GroupedMMBackward.h>
#include <ATen/native/cuda/GroupColumnSums.h>
#include <ATen/native/cuda/GroupColumnSumsLoads.h>
#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/Dispatch.h>
#include <ATen/Functions.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/SMCarveoutCUDA.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace at::native {
namespace {

// A block reads a slab of columns: 32 lanes, and kRowLanes warps on
// different rows, kRowUnroll rows each per step, so one block per SM keeps
// enough loads in flight. Two ways to give a lane its columns
// (ColumnLoads): kScalar, 4 columns 32 apart (any strides; every load
// coalesced across the warp), or kVector, 16 contiguous bytes (8 columns of
// 16-bit, 4 of fp32) in one load where grad's rows are contiguous and
// 16-byte aligned: the same bytes in flight for every dtype, and a quarter
// of the load instructions for 16-bit.
constexpr int kColLanes = 32;
constexpr int kRowLanes = 32;
constexpr int kRowUnroll = 4;
constexpr int kScalarColsPerThread = 4;
constexpr int kVectorBytes = int(kColumnSumsVectorBytes);
// Host choice of row parts per group: enough work items to fill the grid
// several times, but at least this many rows per part on average.
constexpr int64_t kItemsPerBlock = 4;
constexpr int64_t kMinRowsPerPart = 256;
constexpr int64_t kMaxParts = 64;

enum class ColumnLoads { kScalar, kVector };

// Columns per lane (and per lane's row load).
constexpr int lane_column_count(ColumnLoads loads, int64_t element_size) {
  return loads == ColumnLoads::kVector ? kVectorBytes / int(element_size)
                                       : kScalarColsPerThread;
}

template <typename In, ColumnLoads kLoads>
struct LaneColumns {
  static constexpr bool kVector = kLoads == ColumnLoads::kVector;
  static constexpr int kCount = lane_column_count(kLoads, sizeof(In));
  static constexpr int64_t kSlab = kColLanes * kCount;
  // Column j of `lane` within its slab.
  static __host__ __device__ constexpr int at(int lane, int j) {
    return kVector ? lane * kCount + j : lane + j * kColLanes;
  }
};

struct SumsShape {
  int64_t groups;
  int64_t rows;  // sum M with offsets, M per group without
  int64_t n;
  int64_t group_stride, row_stride, col_stride;  // grad, in elements
  int64_t slabs;
  int64_t parts;  // each group's rows split into this many parts
};

// One row's kCount columns of a lane into v: one 16-byte load (the host
// checked the alignment, and N is a multiple of kCount, so a vector is
// wholly in range or wholly out), or kCount scalar loads.
template <typename In, typename Acc, ColumnLoads kLoads>
__device__ __forceinline__ void load_lane_columns(
    const In* row, const int64_t (&col_offset)[LaneColumns<In, kLoads>::kCount],
    const bool (&in_range)[LaneColumns<In, kLoads>::kCount],
    Acc (&v)[LaneColumns<In, kLoads>::kCount]) {
  using Cols = LaneColumns<In, kLoads>;
  if constexpr (Cols::kVector) {
    if (in_range[0]) {
      union {
        uint4 raw;
        In values[Cols::kCount];
      } chunk;
      chunk.raw = *reinterpret_cast<const uint4*>(row + col_offset[0]);
#pragma unroll
      for (int j = 0; j < Cols::kCount; ++j) {
        v[j] = static_cast<Acc>(chunk.values[j]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < Cols::kCount; ++j) {
        v[j] = Acc(0);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < Cols::kCount; ++j) {
      v[j] = in_range[j] ? static_cast<Acc>(row[col_offset[j]]) : Acc(0);
    }
  }
}

// dst (parts, groups, n): part p of group g's column sums. Rows of a group
// come from the clamped offsets (GroupedMMArguments.cuh), so bad offsets
// read nothing out of bounds; an empty group or part writes zeros.
template <typename In, typename Acc, typename OffsT, ColumnLoads kLoads>
__global__ void __launch_bounds__(kColLanes * kRowLanes)
    group_column_sums_kernel(
        SumsShape s, const In* grad, const OffsT* offs, Acc* dst) {
  using Cols = LaneColumns<In, kLoads>;
  constexpr int kCols = Cols::kCount;
  __shared__ Acc partial[kRowLanes][Cols::kSlab];
  const int lane = threadIdx.x;
  const int row_lane = threadIdx.y;
  const int tid = row_lane * kColLanes + lane;
  const int64_t items = s.groups * s.slabs * s.parts;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t part = item % s.parts;
    const int64_t slab = (item / s.parts) % s.slabs;
    const int64_t g = item / (s.parts * s.slabs);
    int64_t start = 0;
    int64_t end = s.rows;
    if (offs != nullptr) {
      start = g == 0 ? 0 : grouped_mm::clamp_offset(offs, g - 1, 0, s.rows);
      end = grouped_mm::clamp_offset(offs, g, start, s.rows);
    }
    const int64_t len = end - start;
    const int64_t r0 = start + len * part / s.parts;
    const int64_t r1 = start + len * (part + 1) / s.parts;
    const In* base = grad + g * s.group_stride;
    int64_t col_offset[kCols];
    bool in_range[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int64_t c = slab * Cols::kSlab + Cols::at(lane, j);
      in_range[j] = c < s.n;
      col_offset[j] = in_range[j] ? c * s.col_stride : 0;
    }
    Acc acc[kCols] = {};
    int64_t r = r0 + row_lane;
    // Loads first, sums after: kRowUnroll rows' loads in flight.
    for (; r + (kRowUnroll - 1) * kRowLanes < r1; r += kRowUnroll * kRowLanes) {
      Acc v[kRowUnroll][kCols];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        load_lane_columns<In, Acc, kLoads>(
            base + (r + u * kRowLanes) * s.row_stride, col_offset, in_range,
            v[u]);
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          acc[j] += v[u][j];
        }
      }
    }
    for (; r < r1; r += kRowLanes) {
      Acc v[kCols];
      load_lane_columns<In, Acc, kLoads>(
          base + r * s.row_stride, col_offset, in_range, v);
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        acc[j] += v[j];
      }
    }
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      partial[row_lane][Cols::at(lane, j)] = acc[j];
    }
    __syncthreads();
    for (int i = tid; i < Cols::kSlab; i += kColLanes * kRowLanes) {
      const int64_t c = slab * Cols::kSlab + i;
      if (c < s.n) {
        Acc sum = 0;
        for (int row = 0; row < kRowLanes; ++row) {
          sum += partial[row][i];
        }
        dst[(part * s.groups + g) * s.n + c] = sum;
      }
    }
    __syncthreads();  // partial is reused by the next item
  }
}

// out (groups * n elements) = the parts' sums, added in part order.
template <typename Acc, typename Out>
__global__ void sum_parts_kernel(
    const Acc* parts_sums, int64_t parts, int64_t elements, Out* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < elements; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Acc sum = 0;
    for (int64_t p = 0; p < parts; ++p) {
      sum += parts_sums[p * elements + i];
    }
    out[i] = static_cast<Out>(sum);
  }
}

// The chunked split. A block is kChunkWarps independent warps; the grid
// stays at one block per allowed SM. The host picks the chunk's rows (a
// power of two from kMinChunkRows to kMaxChunkRows) so that there are at
// least kChunkItemsPerWarp items per warp of the grid: short inputs get
// short chunks (more warps busy), long ones long chunks (fewer partials).
constexpr int kChunkWarps = 16;
constexpr int kChunkRowUnroll = 8;
constexpr int64_t kMinChunkRows = 8;
constexpr int64_t kMaxChunkRows = 256;
constexpr int64_t kChunkItemsPerWarp = 2;

struct ChunkShape {
  SumsShape sums;     // groups, rows, n, strides, slabs (parts unused)
  int64_t group_rows;  // M without offsets (group g is rows [g M, g M + M))
  int64_t chunk_rows;
  int64_t chunks;
};

// Group g's rows in the whole row range: clamped like the GEMMs' groups
// (GroupedMMArguments.cuh), so bad offsets give in-range rows.
template <typename OffsT>
__device__ __forceinline__ void group_bounds(
    const ChunkShape& c, const OffsT* offs, int64_t g, int64_t& start,
    int64_t& end) {
  if (offs == nullptr) {
    start = g * c.group_rows;
    end = start + c.group_rows;
    return;
  }
  start = g == 0 ? 0 : grouped_mm::clamp_offset(offs, g - 1, 0, c.sums.rows);
  end = grouped_mm::clamp_offset(offs, g, start, c.sums.rows);
}

// The first group whose end is past `row` (groups, when none is): a binary
// search over the clamped ends, exact for valid (non-decreasing) offsets
// and in range for any.
template <typename OffsT>
__device__ __forceinline__ int64_t group_of_row(
    const ChunkShape& c, const OffsT* offs, int64_t row) {
  if (offs == nullptr) {
    return row / c.group_rows;
  }
  int64_t lo = 0;
  int64_t hi = c.sums.groups;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (grouped_mm::clamp_offset(offs, mid, 0, c.sums.rows) > row) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// Where a chunk's sum of one group goes: the group's own output row when
// the group lies in one chunk, else a partial of this chunk. A chunk holds
// at most one group that began in an earlier chunk (kHead) and one that
// begins in it and ends in a later one (kTail).
enum class ChunkPart { kWhole, kHead, kTail };

__device__ __forceinline__ ChunkPart chunk_part(
    int64_t start, int64_t end, int64_t chunk, int64_t chunk_rows) {
  const int64_t first = start / chunk_rows;
  const int64_t last = (end - 1) / chunk_rows;
  if (first == last) {
    return ChunkPart::kWhole;
  }
  return chunk == first ? ChunkPart::kTail : ChunkPart::kHead;
}

// partials (2, chunks, n): [0] kHead, [1] kTail. out (groups, n).
template <typename In, typename Acc, typename Out, typename OffsT,
          ColumnLoads kLoads>
__global__ void __launch_bounds__(kColLanes * kChunkWarps)
    chunk_column_sums_kernel(
        ChunkShape c, const In* grad, const OffsT* offs, Out* out,
        Acc* partials) {
  using Cols = LaneColumns<In, kLoads>;
  constexpr int kCols = Cols::kCount;
  const SumsShape& s = c.sums;
  const int lane = threadIdx.x % kColLanes;
  const int64_t warp =
      blockIdx.x * int64_t(kChunkWarps) + threadIdx.x / kColLanes;
  const int64_t warps = int64_t(gridDim.x) * kChunkWarps;
  const int64_t items = c.chunks * s.slabs;
  for (int64_t item = warp; item < items; item += warps) {
    // Neighbouring warps take neighbouring slabs of one chunk: their rows
    // are read together.
    const int64_t slab = item % s.slabs;
    const int64_t chunk = item / s.slabs;
    const int64_t c0 = chunk * c.chunk_rows;
    const int64_t c1 = c0 + c.chunk_rows < s.rows ? c0 + c.chunk_rows : s.rows;
    int64_t col[kCols];
    int64_t col_offset[kCols];
    bool in_range[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      col[j] = slab * Cols::kSlab + Cols::at(lane, j);
      in_range[j] = col[j] < s.n;
      col_offset[j] = in_range[j] ? col[j] * s.col_stride : 0;
    }
    int64_t row = c0;
    bool wrote[2] = {false, false};  // kHead, kTail
    for (int64_t g = group_of_row(c, offs, c0); g < s.groups && row < c1;
         ++g) {
      int64_t start = 0;
      int64_t end = 0;
      group_bounds(c, offs, g, start, end);
      const int64_t r0 = row > start ? row : start;
      const int64_t r1 = end < c1 ? end : c1;
      if (r0 >= r1) {
        continue;  // empty here; the second kernel writes empty groups
      }
      // Row r of the whole range is row r - first_row of group g's matrix.
      const In* base = grad + g * s.group_stride;
      const int64_t first_row = offs == nullptr ? start : 0;
      Acc acc[kCols] = {};
      int64_t r = r0;
      // Loads first, sums after: kChunkRowUnroll rows' loads in flight.
      for (; r + kChunkRowUnroll <= r1; r += kChunkRowUnroll) {
        Acc v[kChunkRowUnroll][kCols];
#pragma unroll
        for (int u = 0; u < kChunkRowUnroll; ++u) {
          load_lane_columns<In, Acc, kLoads>(
              base + (r + u - first_row) * s.row_stride, col_offset,
              in_range, v[u]);
        }
#pragma unroll
        for (int u = 0; u < kChunkRowUnroll; ++u) {
#pragma unroll
          for (int j = 0; j < kCols; ++j) {
            acc[j] += v[u][j];
          }
        }
      }
      for (; r < r1; ++r) {
        Acc v[kCols];
        load_lane_columns<In, Acc, kLoads>(
            base + (r - first_row) * s.row_stride, col_offset, in_range, v);
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          acc[j] += v[j];
        }
      }
      const ChunkPart part = chunk_part(start, end, chunk, c.chunk_rows);
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (!in_range[j]) {
          continue;
        }
        if (part == ChunkPart::kWhole) {
          out[g * s.n + col[j]] = static_cast<Out>(acc[j]);
        } else {
          const int64_t which = part == ChunkPart::kHead ? 0 : 1;
          partials[(which * c.chunks + chunk) * s.n + col[j]] = acc[j];
        }
      }
      if (part != ChunkPart::kWhole) {
        wrote[part == ChunkPart::kHead ? 0 : 1] = true;
      }
      row = r1;
    }
    // Valid offsets never read a partial this item did not write; after a
    // decreasing offset the second kernel may, so it reads zeros, not
    // stale memory. Only this item writes these slots: no race.
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      if (!wrote[which]) {
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          if (in_range[j]) {
            partials[(which * c.chunks + chunk) * s.n + col[j]] = Acc(0);
          }
        }
      }
    }
  }
}

// The groups chunk_column_sums_kernel did not write whole: zeros for an
// empty group, else its first chunk's kTail partial plus the kHead
// partials of the chunks after it, in chunk order.
template <typename Acc, typename Out, typename OffsT>
__global__ void finish_chunk_sums_kernel(
    ChunkShape c, const OffsT* offs, const Acc* partials, Out* out) {
  const SumsShape& s = c.sums;
  const int64_t elements = s.groups * s.n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < elements; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t g = i / s.n;
    const int64_t col = i % s.n;
    int64_t start = 0;
    int64_t end = 0;
    group_bounds(c, offs, g, start, end);
    if (start >= end) {
      out[i] = Out(0);
      continue;
    }
    const int64_t first = start / c.chunk_rows;
    const int64_t last = (end - 1) / c.chunk_rows;
    if (first == last) {
      continue;
    }
    Acc sum = partials[(c.chunks + first) * s.n + col];
    for (int64_t chunk = first + 1; chunk <= last; ++chunk) {
      sum += partials[chunk * s.n + col];
    }
    out[i] = static_cast<Out>(sum);
  }
}

// The chunk's rows: the longest power of two (kMinChunkRows to
// kMaxChunkRows) that still gives every warp of the grid
// kChunkItemsPerWarp items.
int64_t chunk_rows_for(const SumsShape& s, int64_t sm_limit) {
  const int64_t wanted = kChunkItemsPerWarp * sm_limit * kChunkWarps;
  int64_t rows = kMaxChunkRows;
  while (rows > kMinChunkRows &&
         (s.rows + rows - 1) / rows * s.slabs < wanted) {
    rows /= 2;
  }
  return rows;
}

template <typename In, ColumnLoads kLoads, typename Acc, typename Out,
          typename OffsT>
void launch_chunk_sums(
    const ChunkShape& c, const In* grad, const OffsT* offs, Out* out,
    Acc* partials, int64_t sm_limit, cudaStream_t stream) {
  const int64_t items = c.chunks * c.sums.slabs;
  if (items > 0) {  // no rows: only the zeros below
    const int64_t blocks = (items + kChunkWarps - 1) / kChunkWarps;
    chunk_column_sums_kernel<In, Acc, Out, OffsT, kLoads>
        <<<static_cast<unsigned>(std::min(blocks, sm_limit)),
           kColLanes * kChunkWarps, 0, stream>>>(
            c, grad, offs, out, partials);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  constexpr int kThreads = 256;
  const int64_t elements = c.sums.groups * c.sums.n;
  finish_chunk_sums_kernel<<<
      static_cast<unsigned>(
          std::min((elements + kThreads - 1) / kThreads, sm_limit)),
      kThreads, 0, stream>>>(c, offs, partials, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

int64_t parts_for(const SumsShape& s, bool batched, int64_t sm_limit) {
  const int64_t items = std::max<int64_t>(s.groups * s.slabs, 1);
  const int64_t for_grid =
      (kItemsPerBlock * sm_limit + items - 1) / items;
  // The mean rows per group: the host knows no group's own size.
  const int64_t mean_rows =
      batched ? s.rows : s.rows / std::max<int64_t>(s.groups, 1);
  const int64_t for_rows = mean_rows / kMinRowsPerPart;
  return std::clamp<int64_t>(std::min(for_grid, for_rows), 1, kMaxParts);
}

// The loads a call's kernel uses: 16-byte vectors where grad's layout
// allows (column_sums_vector_loads), unless OVERLAP_OPS_COLUMN_SUMS_LOADS
// is `scalar` (the A/B, and a way back).
ColumnLoads column_loads_for(const Tensor& grad, const SumsShape& s) {
  const bool scalar_asked =
      grouped_mm::env_choice("OVERLAP_OPS_COLUMN_SUMS_LOADS", {"scalar"}) == 1;
  const bool aligned = column_sums_vector_loads(
      grad.element_size(), reinterpret_cast<uintptr_t>(grad.const_data_ptr()),
      s.n, s.row_stride, s.col_stride, s.group_stride);
  return aligned && !scalar_asked ? ColumnLoads::kVector : ColumnLoads::kScalar;
}

template <typename In, ColumnLoads kLoads, typename Acc, typename OffsT>
void launch_sums_kernel(const SumsShape& s, const In* grad, const OffsT* offs,
                        Acc* dst, int64_t sm_limit, cudaStream_t stream) {
  const int64_t items = s.groups * s.slabs * s.parts;
  const dim3 grid(static_cast<unsigned>(std::min(items, sm_limit)));
  const dim3 block(kColLanes, kRowLanes);
  group_column_sums_kernel<In, Acc, OffsT, kLoads>
      <<<grid, block, 0, stream>>>(s, grad, offs, dst);
}

enum class ColumnSumsSplit { kChunks, kBlocks };

// OVERLAP_OPS_COLUMN_SUMS_SPLIT = auto (chunks) | blocks: the split a call
// uses (for the A/B, and a way back).
ColumnSumsSplit column_sums_split() {
  return grouped_mm::env_choice("OVERLAP_OPS_COLUMN_SUMS_SPLIT", {"blocks"}) ==
          1
      ? ColumnSumsSplit::kBlocks
      : ColumnSumsSplit::kChunks;
}

// s: grad's shape as the block split sees it (rows per group without
// offsets). offs: contiguous, or undefined for (G, M, N).
void launch_chunk_split(
    const Tensor& grad, const Tensor& offs, const Tensor& out,
    const SumsShape& s, ColumnLoads loads, int64_t sm_limit,
    cudaStream_t stream) {
  const bool batched = !offs.defined();
  ChunkShape c{};
  c.sums = s;
  // One row range over every group: (G, M, N) is G groups of M rows.
  c.sums.rows = batched ? s.groups * s.rows : s.rows;
  c.group_rows = batched ? s.rows : 0;
  c.chunk_rows = chunk_rows_for(c.sums, sm_limit);
  c.chunks = (c.sums.rows + c.chunk_rows - 1) / c.chunk_rows;
  TORCH_INTERNAL_ASSERT(out.is_contiguous());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, grad.scalar_type(), "group_column_sums", [&] {
        using Acc = at::opmath_type<scalar_t>;
        const ScalarType acc_dtype = c10::CppTypeToScalarType<Acc>::value;
        Tensor partials =
            at::empty({2, c.chunks, s.n}, out.options().dtype(acc_dtype));
        const scalar_t* data = grad.const_data_ptr<scalar_t>();
        Acc* partials_ptr = partials.mutable_data_ptr<Acc>();
        grouped_mm::dispatch_offs(offs, [&](auto offs_ptr) {
          const auto launch = [&](auto* out_ptr) {
            if (loads == ColumnLoads::kVector) {
              launch_chunk_sums<scalar_t, ColumnLoads::kVector>(
                  c, data, offs_ptr, out_ptr, partials_ptr, sm_limit, stream);
            } else {
              launch_chunk_sums<scalar_t, ColumnLoads::kScalar>(
                  c, data, offs_ptr, out_ptr, partials_ptr, sm_limit, stream);
            }
          };
          // The result in the accumulator's dtype or grad's (the same for
          // float32 and float64).
          if (out.scalar_type() == acc_dtype) {
            launch(out.mutable_data_ptr<Acc>());
          } else {
            TORCH_INTERNAL_ASSERT(out.scalar_type() == grad.scalar_type());
            if constexpr (!std::is_same_v<scalar_t, Acc>) {
              launch(out.mutable_data_ptr<scalar_t>());
            }
          }
        });
      });
}

void launch_group_column_sums(
    const Tensor& grad, const Tensor& offs, const Tensor& out) {
  const bool batched = !offs.defined();
  const int64_t groups = out.size(0);
  const int64_t n = out.size(1);
  if (groups == 0 || n == 0) {
    return;
  }
  const int64_t sm_limit = at::cuda::current_device_sm_limit();
  SumsShape s{};
  s.groups = groups;
  s.n = n;
  s.rows = batched ? grad.size(1) : grad.size(0);
  s.group_stride = batched ? grad.stride(0) : 0;
  s.row_stride = grad.stride(batched ? 1 : 0);
  s.col_stride = grad.stride(batched ? 2 : 1);
  const ColumnLoads loads = column_loads_for(grad, s);
  const int64_t slab_columns =
      kColLanes * lane_column_count(loads, grad.element_size());
  s.slabs = (n + slab_columns - 1) / slab_columns;
  // The offsets as a contiguous int32/int64 vector, copied (within the
  // carveout) only when strided.
  Tensor offs_vector = offs;
  if (!batched && !offs.is_contiguous()) {
    offs_vector = at::empty({offs.numel()}, offs.options());
    grouped_mm::copy_within_sm_limit(offs, offs_vector, sm_limit);
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  if (column_sums_split() == ColumnSumsSplit::kChunks) {
    launch_chunk_split(grad, offs_vector, out, s, loads, sm_limit, stream);
    return;
  }
  s.parts = parts_for(s, batched, sm_limit);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      kBFloat16, kHalf, grad.scalar_type(), "group_column_sums", [&] {
        using Acc = at::opmath_type<scalar_t>;
        const ScalarType acc_dtype = c10::CppTypeToScalarType<Acc>::value;
        // One part written straight into an accumulator-typed result;
        // otherwise the parts (or the one part, to be cast) go through a
        // workspace and the second kernel.
        const bool direct = s.parts == 1 && out.scalar_type() == acc_dtype &&
            out.is_contiguous();
        Tensor sums = direct
            ? out
            : at::empty({s.parts, groups, n}, out.options().dtype(acc_dtype));
        grouped_mm::dispatch_offs(offs_vector, [&](auto offs_ptr) {
          const scalar_t* data = grad.const_data_ptr<scalar_t>();
          Acc* dst = sums.mutable_data_ptr<Acc>();
          if (loads == ColumnLoads::kVector) {
            launch_sums_kernel<scalar_t, ColumnLoads::kVector>(
                s, data, offs_ptr, dst, sm_limit, stream);
          } else {
            launch_sums_kernel<scalar_t, ColumnLoads::kScalar>(
                s, data, offs_ptr, dst, sm_limit, stream);
          }
        });
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        if (direct) {
          return;
        }
        constexpr int kThreads = 256;
        const int64_t elements = groups * n;
        const dim3 finish_grid(static_cast<unsigned>(std::min(
            (elements + kThreads - 1) / kThreads, sm_limit)));
        // The result in the accumulator's dtype or grad's; any other dtype
        // is the caller's cast (grouped_mm_bias_backward does not ask).
        TORCH_INTERNAL_ASSERT(
            out.is_contiguous() &&
            (out.scalar_type() == acc_dtype ||
             out.scalar_type() == grad.scalar_type()));
        if (out.scalar_type() == acc_dtype) {
          sum_parts_kernel<<<finish_grid, kThreads, 0, stream>>>(
              sums.const_data_ptr<Acc>(), s.parts, elements,
              out.mutable_data_ptr<Acc>());
        } else {
          sum_parts_kernel<<<finish_grid, kThreads, 0, stream>>>(
              sums.const_data_ptr<Acc>(), s.parts, elements,
              out.mutable_data_ptr<scalar_t>());
        }
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

constexpr const char* kOp = "group_column_sums";

void check_inputs(
    const Tensor& grad, const std::optional<Tensor>& offs, ScalarType dtype) {
  const int64_t grad_dim = offs.has_value() ? 2 : 3;
  TORCH_CHECK(
      grad.dim() == grad_dim, kOp, ": grad must be ", grad_dim, "-D ",
      offs.has_value() ? "(sum M, N) with offs" : "(G, M, N) without offs",
      ", got ", grad.dim(), "-D");
  TORCH_CHECK(
      grad.is_cuda(), kOp, ": grad must be a CUDA tensor, got ",
      grad.device());
  const ScalarType t = grad.scalar_type();
  TORCH_CHECK(
      column_sums_takes(t), kOp,
      ": grad must be bfloat16, float16, float32 or float64, got ", t);
  const ScalarType acc = column_sums_acc_dtype(t);
  TORCH_CHECK(
      dtype == acc || dtype == t, kOp, ": dtype must be ", acc,
      " or grad's ", t, ", got ", dtype);
  if (offs.has_value()) {
    TORCH_CHECK(
        offs->dim() == 1 &&
            (offs->scalar_type() == kInt || offs->scalar_type() == kLong) &&
            offs->device() == grad.device(),
        kOp, ": offs must be a 1-D int32 or int64 tensor on ", grad.device(),
        ", got ", offs->dim(), "-D ", offs->scalar_type(), " on ",
        offs->device());
  }
}

}  // namespace

Tensor group_column_sums_cuda(
    const Tensor& grad, const std::optional<Tensor>& offs, ScalarType dtype) {
  check_inputs(grad, offs, dtype);
  const int64_t groups = offs.has_value() ? offs->size(0) : grad.size(0);
  Tensor out =
      at::empty({groups, grad.size(-1)}, grad.options().dtype(dtype));
  launch_group_column_sums(grad, offs.has_value() ? *offs : Tensor(), out);
  return out;
}

}  // namespace at::native
