#pragma once

// The Hopper group tile scheduler with the chunked tile order and launch
// windows of GroupedMMTileOrder.h. CUTLASS's pointer-array cooperative
// kernel accepts only its group scheduler tag, so the chunked scheduler is
// selected by the problem-shape type instead: ChunkedGroupProblemShape is
// CUTLASS's GroupProblemShape plus the chunk and the window, and
// TileSchedulerSelector is specialised for it below. Kernels built with the
// plain GroupProblemShape are unchanged. Included by GroupedMMSm90.cuh only.

#include <ATen/native/cuda/GroupedMMTileOrder.h>

#include <cstdint>

// The scheduler headers are not self-contained: the kernel header brings
// them in with what they need (pipelines, cluster helpers).
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/pipeline/pipeline.hpp>

namespace at::native::grouped_mm::sm90 {

// GroupProblemShape with the number of consecutive tiles each CTA takes
// (chunked_tile_index); the scheduler reads it from its copy of the
// problem shape in its parameters, so one kernel serves every chunk.
struct ChunkedGroupProblemShape
    : cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>> {
  int32_t tile_chunk = 1;
  // The linear tile indices [window_begin, window_end) this launch runs
  // (windowed launches, launch_windows in GroupedMMTileOrder.h; the host
  // sets them in a copy of the built parameters per launch).
  uint64_t window_begin = 0;
  uint64_t window_end = ~uint64_t(0);
};

// CUTLASS's group scheduler, walking the linear tile index in the chunked
// order: only the index each turn asks for changes (initial_work_tile_info
// and advance_to_next_work); the search for a tile's group, the raster
// and the pipeline to the other warps are CUTLASS's.
template <class GroupProblemShape, uint32_t kPipelineStages>
class ChunkedGroupTileScheduler
    : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Group<
          GroupProblemShape, kPipelineStages> {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Group<
      GroupProblemShape, kPipelineStages>;

 public:
  using Params = typename Base::Params;
  using SchedulerResponse = typename Base::SchedulerResponse;

  ChunkedGroupTileScheduler() = default;

  CUTLASS_DEVICE ChunkedGroupTileScheduler(Params const& params,
                                           SchedulerResponse* response)
      : Base(params, response) {
#if defined(__CUDA_ARCH__)
    // The CTA's first index and the grid's size, as CUTLASS's constructor
    // computes them (they are private there).
    if (params.raster_order_ == Base::RasterOrder::AlongN) {
      first_cta_ = uint64_t(blockIdx.x) + uint64_t(blockIdx.y) * gridDim.x;
    } else {
      first_cta_ = uint64_t(blockIdx.x) * gridDim.y + uint64_t(blockIdx.y);
    }
    grid_ctas_ = uint64_t(gridDim.x) * gridDim.y * gridDim.z;
    cluster_ctas_ =
        uint64_t(params.cluster_shape_.m()) * params.cluster_shape_.n();
    const int32_t chunk = params.problem_shapes_.tile_chunk;
    chunk_ = chunk > 1 ? uint64_t(chunk) : 1;
    window_begin_ = params.problem_shapes_.window_begin;
    window_end_ = params.problem_shapes_.window_end;
#endif
  }

  template <class ClusterShape>
  CUTLASS_DEVICE auto initial_work_tile_info(ClusterShape) {
    return work_at(index_at(0));
  }

  // As CUTLASS's, with the chunked index. The whole warp calls this (the
  // group search uses every lane).
  template <typename Pipeline, typename PipelineState>
  CUTLASS_DEVICE auto advance_to_next_work(Pipeline& pipeline,
                                           PipelineState producer_state,
                                           uint32_t advance_count = 1) {
    step_ += advance_count;
    auto work_tile = work_at(index_at(step_));
    pipeline.producer_acquire(producer_state);
    publish(pipeline, producer_state, work_tile);
    return cute::make_tuple(work_tile, true);
  }

 private:
  // Hands a work tile to the other warps through the acquired slot, as
  // CUTLASS's group scheduler does.
  template <typename Pipeline, typename PipelineState, typename WorkTile>
  CUTLASS_DEVICE void publish(Pipeline& pipeline,
                              PipelineState producer_state,
                              WorkTile const& work_tile) {
    if (cute::elect_one_sync()) {
      this->response_ptr_[producer_state.index()] = work_tile;
      cutlass::arch::fence_view_async_shared();
      pipeline.producer_commit(producer_state);
    }
  }

  // The CTA's index at a static turn, counted from its launch's window.
  CUTLASS_DEVICE uint64_t index_at(uint64_t step) const {
    return window_begin_ + chunked_tile_index(first_cta_, grid_ctas_,
                                              cluster_ctas_, chunk_, step);
  }

  // The tile at a linear index, or none past the launch's window (every
  // warp role computes the same answer, so all of them stop together).
  CUTLASS_DEVICE auto work_at(uint64_t index) {
    if (index >= window_end_) {
      return Base::WorkTileInfo::invalid_work_tile();
    }
    return this->get_current_work_for_linear_idx(index);
  }

  uint64_t first_cta_ = 0;
  uint64_t grid_ctas_ = 1;
  uint64_t cluster_ctas_ = 1;
  uint64_t chunk_ = 1;
  uint64_t step_ = 0;
  uint64_t window_begin_ = 0;
  uint64_t window_end_ = ~uint64_t(0);
};

}  // namespace at::native::grouped_mm::sm90

namespace cutlass::gemm::kernel::detail {

// Kernels whose problem shape is ChunkedGroupProblemShape take the chunked
// scheduler; more specialised than CUTLASS's GroupScheduler entry.
template <class TileShape, class ClusterShape, uint32_t kPipelineStages>
struct TileSchedulerSelector<
    GroupScheduler, arch::Sm90, TileShape, ClusterShape, kPipelineStages,
    at::native::grouped_mm::sm90::ChunkedGroupProblemShape> {
  using Scheduler = at::native::grouped_mm::sm90::ChunkedGroupTileScheduler<
      at::native::grouped_mm::sm90::ChunkedGroupProblemShape,
      kPipelineStages>;
};

}  // namespace cutlass::gemm::kernel::detail
