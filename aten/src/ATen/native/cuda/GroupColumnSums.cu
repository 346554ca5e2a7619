// The bias gradient of _grouped_mm on CUDA: per-group column sums of the
// output gradient, (sum M, N) with device offsets or (G, M, N), into (G, N).
// One kernel reads grad once; its grid never exceeds the SM-carveout limit,
// so a backward overlapped with a collective leaves it its SMs. The sums
// are exact float32 (float64 for float64) whatever TF32 allows, and each
// element is added in a fixed order: the result is deterministic.

#include <ATen/native/cuda/GroupColumnSums.h>
#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/Dispatch.h>
#include <ATen/Functions.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/SMCarveoutCUDA.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace at::native {
namespace {

// One warp sums one work item: a slab of 32 * cols_per_thread<In>()
// columns (lane l reads columns l, l + 32, ...: every load coalesced across
// the warp) over one part of one group's rows, kRowUnroll rows per step, so
// each thread keeps 64 bytes of loads in flight. No shared memory and no
// block barrier: a group of a few rows costs a few loads, not a block-wide
// reduction. A block is kWarps warps; the grid is at most SMs - k blocks.
constexpr int kLanes = 32;
constexpr int kWarps = 32;
constexpr int kRowUnroll = 4;
// Host choice of row parts per group: enough items for every warp of the
// grid twice, but at least this many rows per part on average.
constexpr int64_t kItemsPerWarp = 2;
constexpr int64_t kMinRowsPerPart = 64;
constexpr int64_t kMaxParts = 64;

template <typename In>
constexpr int cols_per_thread() {
  return static_cast<int>(16 / sizeof(In));  // 16 bytes of columns a row
}

template <typename In>
constexpr int64_t slab_width() {
  return kLanes * cols_per_thread<In>();
}

struct SumsShape {
  int64_t groups;
  int64_t rows;  // sum M with offsets, M per group without
  int64_t n;
  int64_t group_stride, row_stride, col_stride;  // grad, in elements
  int64_t slabs;
  int64_t parts;  // each group's rows split into this many parts
};

// dst (parts, groups, n): part p of group g's column sums. Rows of a group
// come from the clamped offsets (GroupedMMArguments.cuh), so bad offsets
// read nothing out of bounds; an empty group or part writes zeros.
template <typename In, typename Acc, typename OffsT>
__global__ void __launch_bounds__(kLanes * kWarps)
    group_column_sums_kernel(
        SumsShape s, const In* grad, const OffsT* offs, Acc* dst) {
  constexpr int kCols = cols_per_thread<In>();
  const int lane = threadIdx.x % kLanes;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t items = s.groups * s.slabs * s.parts;
  for (int64_t item = blockIdx.x * static_cast<int64_t>(kWarps) +
           threadIdx.x / kLanes;
       item < items; item += warps) {
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
    const int64_t col0 = slab * slab_width<In>() + lane;
    // Column j of this lane is col0 + j * kLanes; in range while below n.
    const int cols_in_range = col0 >= s.n
        ? 0
        : static_cast<int>(std::min<int64_t>(
              kCols, (s.n - col0 + kLanes - 1) / kLanes));
    const In* base = grad + g * s.group_stride + col0 * s.col_stride;
    const int64_t col_step = kLanes * s.col_stride;
    Acc acc[kCols] = {};
    int64_t r = r0;
    // Loads first, sums after: kRowUnroll * kCols loads in flight.
    for (; r + kRowUnroll <= r1; r += kRowUnroll) {
      In v[kRowUnroll][kCols];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const In* row = base + (r + u) * s.row_stride;
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          v[u][j] = j < cols_in_range ? row[j * col_step] : In(0);
        }
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          acc[j] += static_cast<Acc>(v[u][j]);
        }
      }
    }
    for (; r < r1; ++r) {
      const In* row = base + r * s.row_stride;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (j < cols_in_range) {
          acc[j] += static_cast<Acc>(row[j * col_step]);
        }
      }
    }
    Acc* out = dst + (part * s.groups + g) * s.n + col0;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      if (j < cols_in_range) {
        out[j * kLanes] = acc[j];
      }
    }
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
      (kItemsPerWarp * kWarps * sm_limit + items - 1) / items;
  // The mean rows per group: the host knows no group's own size.
  const int64_t mean_rows =
      batched ? s.rows : s.rows / std::max<int64_t>(s.groups, 1);
  const int64_t for_rows = mean_rows / kMinRowsPerPart;
  return std::clamp<int64_t>(std::min(for_grid, for_rows), 1, kMaxParts);
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
        s.slabs = (n + slab_width<scalar_t>() - 1) / slab_width<scalar_t>();
        s.parts = parts_for(s, batched, sm_limit);
        const int64_t items = s.groups * s.slabs * s.parts;
        const dim3 grid(static_cast<unsigned>(
            std::min((items + kWarps - 1) / kWarps, sm_limit)));
        const dim3 block(kLanes * kWarps);
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
          group_column_sums_kernel<<<grid, block, 0, stream>>>(
              s, grad.const_data_ptr<scalar_t>(), offs_ptr,
              sums.mutable_data_ptr<Acc>());
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
      t == kFloat || t == kDouble || t == kHalf || t == kBFloat16, kOp,
      ": grad must be bfloat16, float16, float32 or float64, got ", t);
  const ScalarType acc = c10::promoteTypes(t, kFloat);
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
