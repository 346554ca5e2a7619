#pragma once

// TF32 grouped GEMM on Hopper that reads N-major (row-major) weights as they
// are, without the transposing copy the K-major kernels need (the default
// for row-major activations, GroupedMMTf32Route.h).
//
// TF32 WGMMA reads only K-major operands from shared memory, but its A
// operand may come from registers, loaded from shared memory in any layout.
// So the problem is swapped, D^T = W^T X^T, per group:
//   A' = W^T   (N x K, N contiguous: MN-major, through registers),
//   B' = X^T   (m x K, K contiguous: K-major, from shared memory),
//   D' = D^T   (N x m, column-major: D row-major).
// The tokens become the GEMM's N, so a group of m tokens runs ceil(m / 256)
// token tiles (ceil(m / 128) with the narrow config) for every 128 weight
// rows.
//
// The collective reuses CUTLASS's pointer-array TMA mainloop for everything
// but the math (loads, per-group tensor maps, pipeline) and replaces mma():
// each consumer thread copies its A' fragment from shared memory to
// registers one k-block ahead of the WGMMA that reads it. Included only by
// GroupedMMSm90_tf32_mn*.cu, one config each.

#include <ATen/native/cuda/GroupedMMSm90.cuh>

#include <cute/atom/copy_atom.hpp>
#include <cutlass/gemm/collective/sm90_mma_array_tma_gmma_ss_warpspecialized.hpp>

namespace at::native::grouped_mm::sm90 {

// large_solo as the K-major TF32 kernels run it (HalfK): 128 weight rows x
// 256 tokens x 32 floats (four stages), no cluster, cooperative.
using Tf32MnBTileConfig = HalfK<LargeSoloTileConfig>;

// Half the token tile, for groups of at most 128 rows on average, where
// the 256-token tile is mostly padding (tf32_mn_b_narrow_wins; past 96 rows
// per group it runs the small groups of a token split). Cooperative like
// the 256-token tile (the mainloop's TiledMma splits the 128 weight rows
// between two consumer warp groups).
struct Tf32MnBNarrowTileConfig {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_32>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = LargeSoloTileConfig::KernelSchedule;
  using EpilogueSchedule = LargeSoloTileConfig::EpilogueSchedule;
};

// The 256-token tile on 2-CTA clusters along the weight rows: the two CTAs
// share each token tile through TMA multicast, halving that operand's
// reads from L2, where TF32's bytes per FLOP make them count
// (tf32_mn_b_cluster_wins, GroupedMMTileChoice.h). A group whose weight-row
// tile count is odd gets one idle CTA.
using Tf32MnBClusterTileConfig = HalfK<LargeTileConfig>;

// The CUTLASS pointer-array mainloop this one extends. Its own mma() (both
// operands from shared memory) is never instantiated; it is given an SS
// TiledMma only so that its shared-memory storage and checks are those of
// TF32 operands. The TMA atoms are the builder's: each operand multicast
// across the cluster's other dimension (A' along N, B' along M).
template <typename Policy, typename Config, typename StrideA,
          typename StrideB, typename SmemAtomA, typename SmemAtomB>
using Tf32ArrayTmaMainloop = cutlass::gemm::collective::CollectiveMma<
    Policy, typename Config::TileShape, float, StrideA, float, StrideB,
    decltype(cute::make_tiled_mma(
        cute::GMMA::ss_op_selector<
            cute::tfloat32_t, cute::tfloat32_t, float,
            typename Config::TileShape, cute::GMMA::Major::K,
            cute::GMMA::Major::K>(),
        cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{})),
    decltype(cutlass::gemm::collective::detail::sm90_cluster_shape_to_tma_atom(
        cute::shape<1>(typename Config::ClusterShape{}))),
    SmemAtomA, void, cute::identity,
    decltype(cutlass::gemm::collective::detail::sm90_cluster_shape_to_tma_atom(
        cute::shape<0>(typename Config::ClusterShape{}))),
    SmemAtomB, void, cute::identity>;

// Policy: CUTLASS's MainloopSm90ArrayTmaGmmaWarpSpecialized; a template
// parameter, so the kernel's name carries it as the other Hopper kernels'
// do (the tests find the kernel family by it).
template <typename Policy, typename Config, typename StrideA,
          typename StrideB>
struct Tf32RegisterAMainloop
    : Tf32ArrayTmaMainloop<
          Policy, Config, StrideA, StrideB,
          cute::GMMA::Layout_MN_SW32_Atom<cute::tfloat32_t>,
          cute::GMMA::Layout_K_SW128_Atom<cute::tfloat32_t>> {
  using Base = Tf32ArrayTmaMainloop<
      Policy, Config, StrideA, StrideB,
      cute::GMMA::Layout_MN_SW32_Atom<cute::tfloat32_t>,
      cute::GMMA::Layout_K_SW128_Atom<cute::tfloat32_t>>;
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::TensorStorage;
  using TileShape = typename Config::TileShape;

  // A' from registers (RS), B' from shared memory; both K-major to the
  // WGMMA, which is what TF32 requires.
  using TiledMma = decltype(cute::make_tiled_mma(
      cute::GMMA::rs_op_selector<cute::tfloat32_t, cute::tfloat32_t, float,
                                 TileShape, cute::GMMA::Major::K,
                                 cute::GMMA::Major::K>(),
      cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{}));
  using SmemCopyAtomA =
      cute::Copy_Atom<cute::AutoVectorizingCopy, cute::tfloat32_t>;

  static_assert(!cute::is_base_of<cute::GMMA::DescriptorIterator,
                                  typename TiledMma::FrgTypeA>::value &&
                    cute::is_base_of<cute::GMMA::DescriptorIterator,
                                     typename TiledMma::FrgTypeB>::value,
                "A' from registers, B' from shared memory");

  // Consumer side: the same pipeline contract as the base's mma() (each
  // k tile released once its WGMMAs are done; the last one by the base's
  // mma_tail, which with one MMA in flight releases exactly one stage).
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline,
                          PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx,
                          TensorStorage& shared_tensors,
                          Params const& /*params*/) {
    if (k_tile_count <= 0) {
      return;  // nothing to wait for (the base's mma_tail releases none)
    }
    using cute::_;
    using cute::Int;
    auto sA = cute::as_position_independent_swizzle_tensor(cute::make_tensor(
        cute::make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{}));
    auto sB = cute::make_tensor(
        cute::make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});

    constexpr int kThreadsPerWarpGroup = cutlass::NumThreadsPerWarpGroup;
    constexpr int kWarpGroups = cute::size(TiledMma{}) / kThreadsPerWarpGroup;
    auto warp_groups = cute::make_layout(Int<kWarpGroups>{},
                                         Int<kThreadsPerWarpGroup>{});
    const int warp_group =
        __shfl_sync(0xFFFFFFFF, thread_idx / kThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_thread_slice(thread_idx);
    auto warp_group_mma = tiled_mma.get_slice(warp_groups(warp_group));

    auto tCrA = thread_mma.partition_fragment_A(sA(_, _, Int<0>{}));
    auto tCsB = warp_group_mma.partition_B(sB);   // (MMA,N,K,PIPE)
    auto tCrB = warp_group_mma.make_fragment_B(tCsB);

    auto smem_copy_a = cute::make_tiled_copy_A(SmemCopyAtomA{}, tiled_mma);
    auto thread_copy_a = smem_copy_a.get_thread_slice(thread_idx);
    auto tCsA_copy = thread_copy_a.partition_S(sA);  // (CPY,M,K,PIPE)
    auto tCrA_copy = thread_copy_a.retile_D(tCrA);   // (CPY,M,K)

    constexpr int kBlocks = decltype(cute::size<2>(tCrA))::value;
    // A k-block's registers are rewritten kBlocks - 1 WGMMAs after the
    // one that read them; at most two WGMMAs stay in flight, so more than
    // three k-blocks keep them apart.
    static_assert(kBlocks > 3, "the K tile needs more than 3 k-blocks");
    CUTE_STATIC_ASSERT_V(cute::size<1>(tCrA) == cute::size<1>(accum));
    CUTE_STATIC_ASSERT_V(cute::size<1>(tCsB) == cute::size<2>(accum));
    CUTE_STATIC_ASSERT_V(cute::size<2>(tCsB) == Int<kBlocks>{});

    PipelineState smem_pipe_release = smem_pipe_read;
    bool release_prior = false;
    tiled_mma.accumulate_ = cute::GMMA::ScaleOut::Zero;
    cute::warpgroup_fence_operand(accum);

    auto token = pipeline.consumer_try_wait(smem_pipe_read);
    pipeline.consumer_wait(smem_pipe_read, token);
    cute::copy(smem_copy_a, tCsA_copy(_, _, 0, smem_pipe_read.index()),
               tCrA_copy(_, _, 0));

    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      const int read_stage = smem_pipe_read.index();
      PipelineState next = smem_pipe_read;
      ++next;
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < kBlocks; ++k_block) {
        // Registers of the next k-block, or of the next tile's first.
        if (k_block + 1 < kBlocks) {
          cute::copy(smem_copy_a, tCsA_copy(_, _, k_block + 1, read_stage),
                     tCrA_copy(_, _, k_block + 1));
        } else if (k_tile_count > 1) {
          auto next_token = pipeline.consumer_try_wait(next);
          pipeline.consumer_wait(next, next_token);
          cute::copy(smem_copy_a, tCsA_copy(_, _, 0, next.index()),
                     tCrA_copy(_, _, 0));
        }
        cute::warpgroup_arrive();
        cute::gemm(tiled_mma, tCrA(_, _, k_block),
                   tCrB(_, _, k_block, read_stage), accum);
        tiled_mma.accumulate_ = cute::GMMA::ScaleOut::One;
        cute::warpgroup_commit_batch();
        cute::warpgroup_wait<2>();
        if (k_block == 1 && release_prior) {
          // Every WGMMA of the previous tile is done (at most k-blocks 0
          // and 1 of this one are in flight), and its A' registers were
          // copied before: the producer may overwrite its stage.
          pipeline.consumer_release(smem_pipe_release);
          ++smem_pipe_release;
        }
      }
      release_prior = true;
      smem_pipe_read = next;
    }
    cute::warpgroup_fence_operand(accum);
  }
};

// The kernel and its argument types, in the shape GroupedGemm has, so the
// host path of GroupedMMSm90.cuh (storage, checks, launch) runs it as is.
template <typename TileConfig>
struct GroupedGemmTf32MnB {
  using Config = TileConfig;
  using ElementIn = float;
  using ElementOut = float;
  using ElementAcc = float;
  // The problem is swapped (see the top of this file): the fill writes
  // (N, m, K) shapes and A' = the weights.
  static constexpr bool kSwapAB = true;
  using LayoutA = cutlass::layout::ColumnMajor;  // W^T: N contiguous
  using LayoutB = cutlass::layout::ColumnMajor;  // X^T: K contiguous
  using LayoutD = cutlass::layout::ColumnMajor;  // D^T: D row-major

  // D^T = acc + the group's bias, which runs along D^T's rows: a column
  // broadcast (the K-major kernels' row broadcast, transposed).
  using BiasCol = cutlass::epilogue::fusion::Sm90ColBroadcast<
      0, typename Config::TileShape, float*, float,
      cute::Stride<cute::_1, cute::_0, cute::_0>, 1>;
  using Epilogue =
      typename BiasEpilogue<Config, float, LayoutD, BiasCol>::Collective;

  // Stages as CUTLASS's builder counts them for pointer-array kernels:
  // shared memory less the two tensor maps, the scheduler's pipeline and
  // the epilogue.
  static constexpr int kKernelCarveout = static_cast<int>(
      2 * sizeof(cute::TmaDescriptor) +
      sizeof(cutlass::PipelineDetail::PipelineAsyncSharedStorage<8>));
  static constexpr int kStages =
      cutlass::gemm::collective::detail::compute_stage_count_or_override<
          cutlass::gemm::collective::detail::sm90_smem_capacity_bytes -
              kKernelCarveout,
          cute::tfloat32_t, cute::tfloat32_t, typename Config::TileShape>(
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename Epilogue::SharedStorage))>{});

  using Mainloop = Tf32RegisterAMainloop<
      cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized<
          kStages, typename Config::ClusterShape,
          typename Config::KernelSchedule>,
      Config, cutlass::gemm::TagToStrideA_t<LayoutA*>,
      cutlass::gemm::TagToStrideB_t<LayoutB*>>;

  // CUTLASS's group problem shape, or the chunked one where the config
  // names it (TileChunked: windowed launches).
  using GroupShape = typename ProblemShapeOf<Config>::type;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<GroupShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

}  // namespace at::native::grouped_mm::sm90
