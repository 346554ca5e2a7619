#pragma once

// The one kernel that turns device offsets into per-group GEMM arguments for
// the tensor-core paths (SM80 and SM90). Each path supplies a writer that
// stores one group's problem in its library's format; which rows, columns
// and base offsets a group gets is decided only by group_problem().

#include <ATen/native/cuda/GroupedMMKernels.h>

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace at::native::grouped_mm {

constexpr int kFillThreads = 256;

// Groups that the tensor-core GEMM is told to skip (as an m = 0 problem).
// The libraries leave a k = 0 output unwritten (CUTLASS 3.x) or would spend
// a tile on it, so the fill writes those groups instead (zeros, or bias
// rows when the GEMM's epilogue adds the bias), or launch_finish_groups
// does (SM80 with a bias).
__device__ __forceinline__ bool skipped_by_gemm(const Group& p) {
  return p.m == 0 || p.n == 0 || p.k == 0;
}

// Zeros what no group owns: rows (or columns) [offs[-1], extent) of a row-
// (column-) grouped output, grid-stride over every thread of the launch.
// Out may be any type whose zero is all-zero bytes of its size.
template <typename Out, typename OffsT>
__device__ __forceinline__ void zero_past_last_group(
    const Geometry& geo, Out* d, const OffsT* offs) {
  if (geo.grouped != GroupedDim::kRows && geo.grouped != GroupedDim::kCols) {
    return;
  }
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

// Calls work(g, p) for every group g whose problem p satisfies needs(p),
// with every thread of the grid (work splits a group over the grid). Each
// block first lists, in parallel, which of the next kBlockThreads groups
// need work: a serial scan of the offsets costs one L2 round trip per
// group. Block-wide: launched with exactly kBlockThreads threads, every
// thread calls it.
template <int kBlockThreads, typename OffsT, typename Needs, typename Work>
__device__ void for_each_group_where(
    const Geometry& geo, const OffsT* offs, Needs needs, Work work) {
  __shared__ int64_t listed[kBlockThreads];
  __shared__ int listed_count;
  for (int64_t first = 0; first < geo.num_groups; first += kBlockThreads) {
    if (threadIdx.x == 0) {
      listed_count = 0;
    }
    __syncthreads();
    const int64_t mine = first + threadIdx.x;
    if (mine < geo.num_groups && needs(group_problem(geo, offs, mine))) {
      listed[atomicAdd(&listed_count, 1)] = mine;  // order does not matter
    }
    __syncthreads();
    const int count = listed_count;
    for (int w = 0; w < count; ++w) {
      work(listed[w], group_problem(geo, offs, listed[w]));
    }
    __syncthreads();  // the list is rebuilt for the next kBlockThreads groups
  }
}

// Zeros one group's output, grid-stride. Unit is the output's element size
// (zero is all-zero bytes); with vector_stores, each thread stores 16
// contiguous bytes of a row (unit column stride, rows 16-byte aligned).
template <typename Unit>
__device__ void zero_group_output(
    const Geometry& geo, Unit* d, const Group& p, bool vector_stores) {
  const int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  Unit* base = d + p.d_offset;
  if (vector_stores) {
    constexpr int kUnits = 16 / sizeof(Unit);
    // Chunks per row fit in 32 bits (n < 2^31); the flat index may not.
    const uint32_t row_chunks = static_cast<uint32_t>(p.n / kUnits);
    const int64_t chunks = p.m * row_chunks;
    for (int64_t i = thread; i < chunks; i += threads) {
      const int64_t r = i / row_chunks;
      const int64_t c = int64_t(i - r * row_chunks) * kUnits;
      *reinterpret_cast<uint4*>(base + r * geo.d.row + c) =
          make_uint4(0, 0, 0, 0);
    }
    return;
  }
  const int64_t count = p.m * p.n;
  for (int64_t i = thread; i < count; i += threads) {
    const int64_t r = i / p.n;
    const int64_t c = i - r * p.n;
    base[r * geo.d.row + c * geo.d.col] = Unit(0);
  }
}

// What the fill writes besides the arguments (decided on the host,
// fill_writes_k0_groups in GroupedMMKernels.h).
struct FillOutputs {
  // The output past the last group's zeros; false where an earlier fill
  // of the same call wrote them (a token split's second launch).
  bool zero_tail;
  bool zero_k0_groups;  // the k = 0 groups' zeros (or bias rows)
  bool vector_stores;   // output_takes_vector_stores
  // When the GEMM's epilogue adds the bias (bias_fused), k = 0 groups,
  // which the GEMM skips, get their bias row here: (G, N) float32.
  const float* k0_bias;
};

// 16 bytes of output, the widest store a thread can issue.
template <typename Out>
struct alignas(16) OutVector {
  static constexpr int kSize = 16 / sizeof(Out);
  Out v[kSize];
};

// Adds group p's bias row to its output; a k = 0 group (which the GEMM
// skipped) gets the bias alone. Run by the finishing kernel after an SM80
// GEMM, and by the fill for Hopper's k = 0 groups (whose epilogue adds the
// bias to the rest). Every block takes a share of the group, so the whole
// grid writes at copy bandwidth. With kVectorized
// (output_takes_vector_stores), a thread owns 16 contiguous bytes of a row.
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

// Also zeros the output past the last group and writes the k = 0 groups
// (zeros, or bias rows with a fused bias; `out` is the output viewed as
// units of its element size): one launch instead of three on the
// tensor-core paths.
template <typename OffsT, typename Writer, typename Unit>
__global__ void fill_group_arguments(
    Geometry geo, const OffsT* offs, Writer write, Unit* out,
    FillOutputs extra) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       g < geo.num_groups; g += step) {
    write(g, group_problem(geo, offs, g));
  }
  if (extra.zero_tail) {
    zero_past_last_group(geo, out, offs);
  }
  if (extra.zero_k0_groups) {
    using Out = std::remove_pointer_t<decltype(Writer::d)>;
    for_each_group_where<kFillThreads>(
        geo, offs, [](const Group& p) { return p.k == 0; },
        [&](int64_t g, const Group& p) {
          if (extra.k0_bias != nullptr) {
            Out* d = reinterpret_cast<Out*>(out);
            const float* bias_row = extra.k0_bias + g * geo.n;
            if (extra.vector_stores) {
              add_group_bias<Out, true>(geo, d, p, bias_row);
            } else {
              add_group_bias<Out, false>(geo, d, p, bias_row);
            }
          } else {
            zero_group_output(geo, out, p, extra.vector_stores);
          }
        });
  }
}

// Enqueues the fill (and the zeros it writes) on the current stream.
// Returns false if the launch failed; raising is left to the host-compiled
// caller. Writer::d points at the output, so its element type
// gives the zeroing's store unit at compile time. write_output: false
// where an earlier fill of the same call wrote the tail and the k = 0
// groups; this one then writes arguments only.
template <typename Writer>
bool launch_fill_group_arguments(
    const LaunchArgs& args, const Writer& write, bool bias_fused = false,
    bool write_output = true) {
  using Out = std::remove_pointer_t<decltype(Writer::d)>;
  static_assert(sizeof(Out) == 2 || sizeof(Out) == 4,
                "tensor-core outputs are bf16, fp16 or fp32");
  using Unit = std::conditional_t<sizeof(Out) == 2, uint16_t, uint32_t>;
  const auto stream = at::cuda::getCurrentCUDAStream();
  // The tail's size is device-only, so the grid is sized for any tail:
  // one block per allowed SM (the carveout), like every kernel of the call.
  const int blocks =
      static_cast<int>(std::max<int64_t>(1, args.sm_limit));
  auto* out = static_cast<Unit*>(args.out.mutable_data_ptr());
  const FillOutputs extra{
      write_output,
      write_output && fill_writes_k0_groups(args, bias_fused),
      output_takes_vector_stores(args),
      bias_fused && args.bias.defined() ? args.bias.const_data_ptr<float>()
                                        : nullptr};
  dispatch_offs(args.offs, [&](auto offs) {
    fill_group_arguments<<<blocks, kFillThreads, 0, stream>>>(
        args.geo, offs, write, out, extra);
  });
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace at::native::grouped_mm
