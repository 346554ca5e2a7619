#pragma once

// Half-tile MMA skip for the cooperative 128-row tiles (an experiment,
// pinned by OVERLAP_OPS_SM90_HALF_TILE=skip; see TileChoice).
//
// A group's last 128-row tile is padding past the group's end; TMA fills
// those rows of A with zeros and the store clips them, but the tensor cores
// still multiply them. In the cooperative kernel each of the two consumer
// warp groups owns 64 of the tile's rows. When all of a warp group's rows
// lie past the group's end, it skips its MMAs (walking the mainloop
// pipeline as it would, so the producer is never held up) and the other
// warp group has the tensor cores to itself. ncu of gpt_oss_120b_w13
// skewed bf16 fwd (results/ncu/2026-12-01e): tensor pipe 88% busy, L2 63%,
// with 26% of the computed rows padding.
//
// CUTLASS's mma() is not told which tile it computes. The tile scheduler's
// get_work_k_tile_count is (each consumer thread calls it just before
// mma() with the tile and its group's shape), so a scheduler for these
// kernels records the tile's rows left in a per-thread slot of global
// memory, and the mainloop reads it back. The kernels pick that scheduler
// through their problem-shape type (HalfTileProblemShape), as CUTLASS's
// ptr-array kernels accept no scheduler tag but GroupScheduler.

#include <climits>
#include <cstdint>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/pipeline/pipeline.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/gemm/kernel/sm90_tile_scheduler_group.hpp>

namespace at::native::grouped_mm::sm90 {

// GroupProblemShape under its own name: the scheduler selector below maps
// it to HalfTileGroupScheduler.
struct HalfTileProblemShape
    : cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>> {};

namespace half_tile {

// One 64-bit slot per (CTA, thread): a tag (the launch's %gridid and the
// linear CTA index) and the tile's rows left. A thread reads back only the
// slot it wrote; a slot another launch (of a kernel of the same
// translation unit, on another stream) overwrote in between fails the tag
// check, and then the whole warp group runs its MMAs (skips_mma's vote):
// correct, only slower. Keyed by CTA rather than SM, because a CTA may
// move to another SM after preemption; by the linear CTA index, because
// the grid is (1, SMs, 1) when the scheduler walks N first. CTAs past
// kSlotCtas record nothing and never skip.
constexpr int kSlotCtas = 256;
constexpr int kSlotThreads = 384;
constexpr int kSlots = kSlotCtas * kSlotThreads;
// A variable template, and the functions below templates, so that only
// the translation units whose kernels use them define it (one 768 KiB
// copy in device memory each), not every unit that includes this header.
template <int kCount>
static __device__ unsigned long long slots[kCount];

CUTLASS_DEVICE unsigned cta_index() {
  return blockIdx.x + blockIdx.y * gridDim.x +
         blockIdx.z * gridDim.x * gridDim.y;
}

CUTLASS_DEVICE bool has_slot() {
  return cta_index() < kSlotCtas && threadIdx.x < kSlotThreads;
}

CUTLASS_DEVICE unsigned long long slot_tag() {
  unsigned long long grid;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  return ((grid << 16) | cta_index()) & 0xffffffffffffull;
}

template <int kCount = kSlots>
CUTLASS_DEVICE unsigned long long* slot() {
  return &slots<kCount>[cta_index() * kSlotThreads + threadIdx.x];
}

// rows_left: the group's rows from the tile's first row on (at most 0
// for a tile wholly past the group's end).
template <int kCount = kSlots>
CUTLASS_DEVICE void record_rows_left(int rows_left) {
  if (!has_slot()) {
    return;
  }
  const int clamped =
      rows_left < -1 ? -1 : (rows_left > 0xfffe ? 0xfffe : rows_left);
  *slot<kCount>() = (slot_tag() << 16) | static_cast<unsigned>(clamped + 1);
}

// The rows left this thread recorded for its current tile, or INT_MAX if
// the slot no longer holds them.
template <int kCount = kSlots>
CUTLASS_DEVICE int recorded_rows_left() {
  if (!has_slot()) {
    return INT_MAX;
  }
  const unsigned long long value = *slot<kCount>();
  if ((value >> 16) != slot_tag()) {
    return INT_MAX;
  }
  return static_cast<int>(value & 0xffffu) - 1;
}

// Whether warp group `warp_group` (all 128 of its threads call this
// together) skips its MMAs: only if every thread's record says that none
// of its rows lies in the group, so the warp group agrees even when
// another launch overwrote some of its slots (wgmma must be issued by
// the whole warp group or by none of it). A named barrier per warp group,
// past the ids CUTLASS reserves.
template <int kCount = kSlots>
CUTLASS_DEVICE bool skips_mma(int warp_group, int rows_per_warp_group) {
  const int skip =
      recorded_rows_left<kCount>() <= warp_group * rows_per_warp_group;
  const int barrier_id =
      static_cast<int>(cutlass::arch::ReservedNamedBarriers::FirstUserBarrier) +
      warp_group;
  int all_skip;
  __syncwarp();  // bar.red is .aligned: each warp arrives converged
  asm volatile(
      "{\n"
      "  .reg .pred p, q;\n"
      "  setp.ne.b32 p, %1, 0;\n"
      "  bar.red.and.pred q, %2, %3, p;\n"
      "  selp.b32 %0, 1, 0, q;\n"
      "}\n"
      : "=r"(all_skip)
      : "r"(skip), "r"(barrier_id), "n"(cutlass::NumThreadsPerWarpGroup));
  return all_skip != 0;
}

}  // namespace half_tile

// CUTLASS's group scheduler, recording each tile's rows left when a thread
// asks for the tile's K extent.
template <int Stages>
class HalfTileGroupScheduler
    : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Group<
          HalfTileProblemShape, Stages> {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Group<
      HalfTileProblemShape, Stages>;

 public:
  using Base::Base;
  using typename Base::WorkTileInfo;

  template <class ProblemShapeMNKL, class TileShape>
  CUTLASS_HOST_DEVICE static int get_work_k_tile_count(
      WorkTileInfo const& tile, ProblemShapeMNKL problem_shape,
      TileShape tile_shape) {
#if defined(__CUDA_ARCH__)
    half_tile::record_rows_left(
        static_cast<int>(cute::get<0>(problem_shape)) -
        tile.M_idx * static_cast<int>(cute::get<0>(tile_shape)));
#endif
    return Base::get_work_k_tile_count(tile, problem_shape, tile_shape);
  }
};

// The mainloop Base (CUTLASS's pointer-array TMA mainloop of a cooperative
// 128-row tile) with mma() skipping a warp group whose 64 rows all lie
// past the group's end. Its accumulators are left as they are: the store
// clips those rows (TMA writes only the group's rows).
//
// Base::mma is called on every path, with no K tiles where the warp group
// skips: the default kernel already branches on a K extent of zero, so
// the wgmma pipeline keeps its shape. A branch around Base::mma, or
// zeroing the accumulators, puts non-wgmma definitions of the accumulator
// registers into the pipeline, and ptxas then serializes every wgmma of
// the kernel (C7515): 4-13% slower on every row, balanced ones included
// (first GPU run, 2026-12-01f).
template <typename Base>
struct HalfTileSkipMainloop : Base {
  using Base::Base;
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;

  static constexpr int kWarpGroups =
      cute::size(typename Base::TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
  static constexpr int kRowsPerWarpGroup =
      cute::size<0>(typename Base::TileShape{}) / kWarpGroups;
  // The warp groups must split the tile along M (AtomLayout (2, 1, 1)).
  static_assert(kWarpGroups == 2 && kRowsPerWarpGroup == 64 &&
                    cute::size<1>(typename Base::TiledMma::ThrLayoutVMNK{}) == 2,
                "the half-tile skip needs two consumer warp groups splitting "
                "a 128-row tile along M");

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline,
                          PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx,
                          TensorStorage& shared_tensors,
                          Params const& mainloop_params) {
    const int warp_group = thread_idx / cutlass::NumThreadsPerWarpGroup;
    const bool skip = half_tile::skips_mma(warp_group, kRowsPerWarpGroup);
    if (skip) {
      walk_pipeline(pipeline, smem_pipe_read, k_tile_count);
    }
    Base::mma(pipeline, smem_pipe_read, accum, skip ? 0 : k_tile_count,
              thread_idx, shared_tensors, mainloop_params);
  }

 private:
  // Base::mma's waits and releases without its MMAs: each stage waited
  // for, all but the last K_PIPE_MMAS released (mma_tail, which the kernel
  // calls with the tile's K extent, releases those).
  CUTLASS_DEVICE static void walk_pipeline(MainloopPipeline pipeline,
                                           PipelineState smem_pipe_read,
                                           int k_tile_count) {
    constexpr int kPipeMmas = Base::K_PIPE_MMAS;  // a copy: not odr-used
    const int held = k_tile_count < kPipeMmas ? k_tile_count : kPipeMmas;
    PipelineState smem_pipe_release = smem_pipe_read;
    for (int k_tile = 0; k_tile < k_tile_count; ++k_tile) {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      if (k_tile >= held) {
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
      }
      ++smem_pipe_read;
    }
  }
};

}  // namespace at::native::grouped_mm::sm90

namespace cutlass::gemm::kernel::detail {

// The ptr-array kernels pick their scheduler here by problem-shape type;
// this one for HalfTileProblemShape.
template <class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<GroupScheduler, arch::Sm90, TileShape,
                             ClusterShape, Stages,
                             at::native::grouped_mm::sm90::HalfTileProblemShape> {
  using Scheduler =
      at::native::grouped_mm::sm90::HalfTileGroupScheduler<Stages>;
};

}  // namespace cutlass::gemm::kernel::detail
