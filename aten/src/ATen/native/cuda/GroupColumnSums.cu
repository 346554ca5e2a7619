// The bias gradient of _grouped_mm on CUDA: per-group column sums of the
// output gradient, (sum M, N) with device offsets or (G, M, N), into (G, N).
// One kernel reads grad once; its grid never exceeds the SM-carveout limit,
// so a backward overlapped with a collective leaves it its SMs. The sums
// are exact float32 (float64 for float64) whatever TF32 allows, and each
// element is added in a fixed order: the result is deterministic.
// Plain CUDA, no CUTLASS: the op's CUDA dispatch key serves ROCm too, so the
// ROCm build compiles the hipified copy of this file as well.

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
// allows (column_sums_vector_loads).
ColumnLoads column_loads_for(const Tensor& grad, const SumsShape& s) {
  return column_sums_vector_loads(
             grad.element_size(),
             reinterpret_cast<uintptr_t>(grad.const_data_ptr()), s.n,
             s.row_stride, s.col_stride, s.group_stride)
      ? ColumnLoads::kVector
      : ColumnLoads::kScalar;
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
  s.parts = parts_for(s, batched, sm_limit);
  // The offsets as a contiguous int32/int64 vector, copied (within the
  // carveout) only when strided.
  Tensor offs_vector = offs;
  if (!batched && !offs.is_contiguous()) {
    offs_vector = at::empty({offs.numel()}, offs.options());
    grouped_mm::copy_within_sm_limit(offs, offs_vector, sm_limit);
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
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
