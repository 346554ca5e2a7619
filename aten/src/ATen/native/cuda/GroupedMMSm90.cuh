#pragma once

// Hopper grouped GEMM: CUTLASS 3.x pointer-array kernels (TMA loads,
// warp-specialised WGMMA mainloop, persistent group tile scheduler). The
// per-group problem shapes, pointers and strides are written on the device by
// fill_group_arguments from the offsets, so the host never learns the group
// sizes. Included only by the GroupedMMSm90*.cu instantiation files.

#include <ATen/native/cuda/GroupedMMCutlassTypes.cuh>
#include <ATen/native/cuda/GroupedMMFillArguments.cuh>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMSm90.h>
#include <ATen/native/cuda/GroupedMMSm90TileScheduler.cuh>

#include <ATen/Functions.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/cluster_launch.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/device_kernel.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

namespace at::native::grouped_mm::sm90 {

using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;

// Large tiles for many rows per group; pingpong with small tiles when groups
// are short (decode, many experts), where a 128-row tile would be mostly
// padding.
struct LargeTileConfig {
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
  using KernelSchedule =
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using EpilogueSchedule =
      cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
};

// A 2-CTA cluster along M idles one CTA of every group that has a single M
// tile. Pingpong: one warp group's epilogue overlaps the other's MMAs.
struct MediumTileConfig {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
};

// TileConfig::kLargeSolo: LargeTileConfig without the cluster, so no group
// is padded to an even number of 128-row tiles.
struct LargeSoloTileConfig {
  using TileShape = LargeTileConfig::TileShape;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = LargeTileConfig::KernelSchedule;
  using EpilogueSchedule = LargeTileConfig::EpilogueSchedule;
};

// TileConfig::kWide: 64-row tiles as wide as the large ones, pingpong, no
// cluster: a group's last partial tile pads at most 63 rows instead of 127
// (skewed groups), at the cost of loading each weight tile for every 64
// rows instead of 128.
struct WideTileConfig {
  using TileShape = cute::Shape<cute::_64, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
};

struct SmallTileConfig {
  using TileShape = cute::Shape<cute::_64, cute::_128, cute::_128>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
};

// Wider store tiles (TileChoice::store_tile_cols): a 128x256 config
// (large for 16-bit wgrad, large_solo for 16-bit fwd and dgrad; both by
// default, store_tile_cols_for) storing its output tile through 128 x kCols
// subtiles instead of CUTLASS's choice (128x32 for 16-bit output). Each
// subtile costs two barriers of the epilogue warp groups and one TMA
// store, so wider subtiles issue fewer, larger stores; the smem they take
// comes out of the mainloop stages. Why: wgrad rows with few tokens per
// group mostly write their output, and wrote it at about half the copy
// bandwidth with 32-column subtiles.
template <typename Base, int kCols>
struct StoreTileConfig : Base {
  using EpilogueTile = cute::Shape<cute::_128, cute::Int<kCols>>;
};

// TileChunked: a config whose kernel takes the chunked tile order
// (GroupedMMTileOrder.h; TileChoice::tile_chunk): the same
// tiles and epilogue, with ChunkedGroupProblemShape selecting the
// scheduler.
template <typename Base>
struct TileChunked : Base {
  using GroupProblemShapeType = ChunkedGroupProblemShape;
};

// A config's problem-shape type: its GroupProblemShapeType where it names
// one, else CUTLASS's GroupProblemShape.
template <typename Config, typename = void>
struct ProblemShapeOf {
  using type = ProblemShape;
};
template <typename Config>
struct ProblemShapeOf<Config,
                      std::void_t<typename Config::GroupProblemShapeType>> {
  using type = typename Config::GroupProblemShapeType;
};

// A config's epilogue subtile: its EpilogueTile where it names one, else
// CUTLASS's choice.
template <typename Config, typename = void>
struct EpilogueTileOf {
  using type = cutlass::epilogue::collective::EpilogueTileAuto;
};
template <typename Config>
struct EpilogueTileOf<Config, std::void_t<typename Config::EpilogueTile>> {
  using type = typename Config::EpilogueTile;
};

// The configs' K extents are sized for 16-bit inputs (64 or 128 elements
// per row of a mainloop stage). A TF32 stage of as many floats is twice
// the bytes: the 128x256 tile then fits two stages (96 KB each) where
// 16-bit fits four. HalfK keeps the bytes per stage for TF32 (the
// default; OVERLAP_OPS_SM90_TF32_K_TILE=long runs SameK for an A/B).
template <typename Config>
struct HalfK {
  using Tile = typename Config::TileShape;
  using TileShape = cute::Shape<
      cute::Int<decltype(cute::size<0>(Tile{}))::value>,
      cute::Int<decltype(cute::size<1>(Tile{}))::value>,
      cute::Int<decltype(cute::size<2>(Tile{}))::value / 2>>;
  using ClusterShape = typename Config::ClusterShape;
  using KernelSchedule = typename Config::KernelSchedule;
  using EpilogueSchedule = typename Config::EpilogueSchedule;
};

template <typename Config>
using SameK = Config;

// The epilogue of the Hopper kernels: D = acc + the group's bias, Bias
// being a row or column broadcast with a pointer per group, stored through
// TMA in LayoutD.
template <typename Config, typename ElementOut, typename LayoutD,
          typename Bias>
struct BiasEpilogue {
  static constexpr int kAlignOut = 16 / sizeof(ElementOut);
  using Op = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<
          cutlass::plus, ElementOut, float,
          cutlass::FloatRoundStyle::round_to_nearest>,
      cutlass::epilogue::fusion::Sm90AccFetch, Bias>;
  using Collective = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      typename Config::TileShape, typename Config::ClusterShape,
      typename EpilogueTileOf<Config>::type, float, float, void,
      LayoutD*, kAlignOut, ElementOut, LayoutD*, kAlignOut,
      typename Config::EpilogueSchedule, Op>::CollectiveOp;
};

template <typename In, typename Out, bool kARowMajor, bool kBRowMajor,
          typename Config>
struct GroupedGemm {
  using ElementIn = typename CutlassType<In>::type;
  using ElementOut = typename CutlassType<Out>::type;
  using ElementAcc = float;
  using LayoutA = std::conditional_t<kARowMajor, cutlass::layout::RowMajor,
                                     cutlass::layout::ColumnMajor>;
  using LayoutB = std::conditional_t<kBRowMajor, cutlass::layout::RowMajor,
                                     cutlass::layout::ColumnMajor>;
  using LayoutD = cutlass::layout::RowMajor;
  // The fill writes each group's problem as it is (see GroupedGemmTf32MnB
  // for the swapped one).
  static constexpr bool kSwapAB = false;
  static constexpr int kAlignIn = 16 / sizeof(ElementIn);

  // D = acc + the group's bias row, fused into the epilogue: a pointer per
  // group (filled on the device), or no pointer array at all, and the row
  // broadcast adds zeros (EnableNullptr), so calls with and without a bias
  // share one kernel. The broadcast loads the row element by element, so
  // a bias row may start wherever group g * N floats puts it. It fits in
  // the epilogue's padding: no config loses a mainloop stage (a review's
  // count, to confirm on the GPU).
  using BiasRow = cutlass::epilogue::fusion::Sm90RowBroadcast<
      0, typename Config::TileShape, float*, float,
      cute::Stride<cute::_0, cute::_1, cute::_0>, 1>;
  using Epilogue = typename BiasEpilogue<Config, ElementOut, LayoutD,
                                         BiasRow>::Collective;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementIn,
      LayoutA*, kAlignIn, ElementIn, LayoutB*, kAlignIn, ElementAcc,
      typename Config::TileShape, typename Config::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Config::KernelSchedule>::CollectiveOp;

  using GroupShape = typename ProblemShapeOf<Config>::type;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<GroupShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

// A cute stride with exactly one dynamic (int64_t) mode: the leading
// dimension. Sets that mode and leaves the static ones.
template <typename Stride>
__device__ Stride stride_with_leading_dim(int64_t ld) {
  Stride s{};
  if constexpr (cute::is_same_v<
                    cute::remove_cvref_t<decltype(cute::get<0>(s))>,
                    int64_t>) {
    cute::get<0>(s) = ld;
  } else {
    cute::get<1>(s) = ld;
  }
  return s;
}

// Device arrays the pointer-array kernel reads, one entry per group.
template <typename G>
struct DeviceArguments {
  typename ProblemShape::UnderlyingProblemShape* shapes;
  const typename G::ElementIn** a;
  const typename G::ElementIn** b;
  typename G::ElementOut** d;
  typename G::StrideA* stride_a;
  typename G::StrideB* stride_b;
  typename G::StrideD* stride_d;
  // The group's bias row (nullptr without a bias: no array then).
  const float** bias = nullptr;
};

// Stores one group's problem in the pointer-array kernel's format; run by
// fill_group_arguments (GroupedMMFillArguments.cuh).
template <typename G>
struct Sm90ArgumentWriter {
  const typename G::ElementIn* a;
  const typename G::ElementIn* b;
  typename G::ElementOut* d;
  LeadingDims ld;
  DeviceArguments<G> out;
  const float* bias = nullptr;  // (G, N) float32, or nullptr
  int64_t bias_row_stride = 0;  // N
  // TileChoice::split_rows and split_past: groups on the other side of
  // the split are written as empty problems, which this launch skips.
  int64_t split_rows = 0;
  bool split_past = false;

  __device__ void operator()(int64_t g, const Group& p) const {
    const bool other_side =
        split_rows > 0 && (p.m > split_rows) != split_past;
    const int rows =
        skipped_by_gemm(p) || other_side ? 0 : static_cast<int>(p.m);
    if constexpr (G::kSwapAB) {
      // D^T = B^T A^T: the GEMM's A is this group's B and its rows are
      // D's columns.
      out.shapes[g] = cute::make_shape(static_cast<int>(p.n), rows,
                                       static_cast<int>(p.k));
      out.a[g] = b + p.b_offset;
      out.b[g] = a + p.a_offset;
      out.stride_a[g] = stride_with_leading_dim<typename G::StrideA>(ld.b);
      out.stride_b[g] = stride_with_leading_dim<typename G::StrideB>(ld.a);
    } else {
      out.shapes[g] = cute::make_shape(rows, static_cast<int>(p.n),
                                       static_cast<int>(p.k));
      out.a[g] = a + p.a_offset;
      out.b[g] = b + p.b_offset;
      out.stride_a[g] = stride_with_leading_dim<typename G::StrideA>(ld.a);
      out.stride_b[g] = stride_with_leading_dim<typename G::StrideB>(ld.b);
    }
    out.d[g] = d + p.d_offset;
    if (out.bias != nullptr) {
      out.bias[g] = bias + g * bias_row_stride;
    }
    out.stride_d[g] =
        stride_with_leading_dim<typename G::StrideD>(ld.d);
  }
};

inline int64_t align_up(int64_t bytes) {
  return (bytes + 127) / 128 * 128;
}

// CUTLASS arguments of G over `shapes`, with the pointers and strides of
// `dev` (null pointers are fine for sizing the workspace).
template <typename G>
typename G::Gemm::Arguments gemm_arguments(
    const LaunchArgs& args, const DeviceArguments<G>& dev,
    typename ProblemShape::UnderlyingProblemShape* shapes,
    RasterOrder raster = RasterOrder::kAlongM, int tile_chunk = 1,
    uint32_t* tile_counter = nullptr) {
  typename G::GroupShape problem{};
  problem.num_groups = static_cast<int>(args.geo.num_groups);
  problem.problem_shapes = shapes;
  problem.host_problem_shapes = nullptr;
  if constexpr (std::is_same_v<typename G::GroupShape,
                               ChunkedGroupProblemShape>) {
    problem.tile_chunk = tile_chunk;
    problem.tile_counter = tile_counter;
  }
  typename G::Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGrouped, problem,
      {dev.a, dev.stride_a, dev.b, dev.stride_b},
      {{}, nullptr, nullptr, dev.d, dev.stride_d}};
  // The epilogue tree's arguments: children first (accumulator, bias row),
  // then the node (plus).
  arguments.epilogue.thread = {{}, {dev.bias, 0.f, {}}, {}};
  arguments.hw_info.device_id = args.out.get_device();
  // The SM carveout: the persistent grid never exceeds sm_limit CTAs.
  arguments.hw_info.sm_count = static_cast<int>(args.sm_limit);
  using RasterOptions = decltype(arguments.scheduler.raster_order);
  arguments.scheduler.raster_order = raster == RasterOrder::kAlongN
      ? RasterOptions::AlongN
      : RasterOptions::AlongM;
  return arguments;
}

template <typename G>
int64_t gemm_workspace_bytes(const LaunchArgs& args) {
  return static_cast<int64_t>(G::Gemm::get_workspace_size(
      gemm_arguments<G>(args, DeviceArguments<G>{}, nullptr)));
}

// Where the per-group argument arrays and the GEMM's workspace live: one
// device allocation per call (each allocation is host time before the
// first launch).
template <typename G>
struct CallStorage {
  DeviceArguments<G> dev;
  void* workspace = nullptr;
  // The dynamic walk's counter (TileChoice::dynamic_tiles), else null.
  uint32_t* tile_counter = nullptr;
};

template <typename G>
CallStorage<G> carve_call_storage(
    Tensor& storage, int64_t groups, bool bias, int64_t workspace_bytes,
    bool tile_counter = false) {
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  const int64_t sizes[] = {
      align_up(groups * int64_t(sizeof(Shape))),
      align_up(groups * int64_t(sizeof(void*))),
      align_up(groups * int64_t(sizeof(void*))),
      align_up(groups * int64_t(sizeof(void*))),
      align_up(groups * int64_t(sizeof(typename G::StrideA))),
      align_up(groups * int64_t(sizeof(typename G::StrideB))),
      align_up(groups * int64_t(sizeof(typename G::StrideD))),
      bias ? align_up(groups * int64_t(sizeof(float*))) : 0,
      tile_counter ? align_up(int64_t(sizeof(uint32_t))) : 0,
      align_up(workspace_bytes)};
  int64_t total = 0;
  for (int64_t s : sizes) {
    total += s;
  }
  storage = at::empty({total}, TensorOptions().dtype(kByte).device(kCUDA));
  char* p = static_cast<char*>(storage.mutable_data_ptr());
  CallStorage<G> call;
  DeviceArguments<G>& args = call.dev;
  args.shapes = reinterpret_cast<Shape*>(p);
  p += sizes[0];
  args.a = reinterpret_cast<const typename G::ElementIn**>(p);
  p += sizes[1];
  args.b = reinterpret_cast<const typename G::ElementIn**>(p);
  p += sizes[2];
  args.d = reinterpret_cast<typename G::ElementOut**>(p);
  p += sizes[3];
  args.stride_a = reinterpret_cast<typename G::StrideA*>(p);
  p += sizes[4];
  args.stride_b = reinterpret_cast<typename G::StrideB*>(p);
  p += sizes[5];
  args.stride_d = reinterpret_cast<typename G::StrideD*>(p);
  p += sizes[6];
  args.bias = bias ? reinterpret_cast<const float**>(p) : nullptr;
  p += sizes[7];
  call.tile_counter = tile_counter ? reinterpret_cast<uint32_t*>(p) : nullptr;
  p += sizes[8];
  call.workspace = p;
  return call;
}

// G's kernel, checked by CUTLASS, not yet initialised or launched.
template <typename G>
struct CheckedGemm {
  typename G::Gemm gemm;
  typename G::Gemm::Arguments arguments;
  void* workspace;
};

// Builds G's arguments over `shapes` and asks CUTLASS whether it can run
// them; launches nothing. Returns nullptr, or what CUTLASS refused.
// Raising is left to the host-compiled caller (see GroupedMMCUDA.cpp).
template <typename G>
const char* check_gemm(
    const LaunchArgs& args, const DeviceArguments<G>& dev,
    typename ProblemShape::UnderlyingProblemShape* shapes, void* workspace,
    RasterOrder raster, int tile_chunk, uint32_t* tile_counter,
    CheckedGemm<G>& checked) {
  checked.arguments =
      gemm_arguments<G>(args, dev, shapes, raster, tile_chunk, tile_counter);
  checked.workspace = workspace;
  if (checked.gemm.can_implement(checked.arguments) !=
      cutlass::Status::kSuccess) {
    return "CUTLASS can_implement rejected the operands";
  }
  return nullptr;
}

// Builds a checked kernel's parameters. CUTLASS's initialize also sets the
// kernel's shared-memory attribute (a cudaFuncSetAttribute, microseconds of
// host time) on every call; it is needed once per kernel and device, so
// later calls take update, which builds the same parameters. update skips
// initialize_workspace, a no-op for these kernels (pointer-array TMA
// mainloop, pointer-array epilogue whose row broadcast keeps no
// workspace, group tile scheduler: none of them writes a workspace on the
// host side).
template <typename G>
cutlass::Status set_parameters(
    CheckedGemm<G>& checked, cudaStream_t stream, bool initialize_always) {
  constexpr int kMaxDevices = 64;
  static std::atomic<uint64_t> attribute_set{0};  // a bit per device
  const int device = checked.arguments.hw_info.device_id;
  const uint64_t bit =
      device >= 0 && device < kMaxDevices ? uint64_t(1) << device : 0;
  if (!initialize_always && bit != 0 &&
      (attribute_set.load(std::memory_order_acquire) & bit)) {
    return checked.gemm.update(checked.arguments, checked.workspace);
  }
  const cutlass::Status status =
      checked.gemm.initialize(checked.arguments, checked.workspace, stream);
  if (status == cutlass::Status::kSuccess) {
    attribute_set.fetch_or(bit, std::memory_order_release);
  }
  return status;
}

template <typename G>
const char* set_checked_parameters(
    CheckedGemm<G>& checked, cudaStream_t stream, bool initialize_always) {
  if (set_parameters(checked, stream, initialize_always) !=
      cutlass::Status::kSuccess) {
    return "CUTLASS initialize failed";
  }
  return nullptr;
}

// Launches a kernel with a cluster as CUTLASS's run() does, but without
// ClusterLauncher::init: run() sets the kernel's non-portable cluster size
// attribute on every launch (a cudaFuncSetAttribute, ~3.5 us of host time
// per call: results/hostpath/2026-11-30h). A cluster of at most 8 CTAs is
// portable and needs no attribute. Same grid, block, shared memory and
// cluster shape as run().
template <typename G>
cutlass::Status launch_portable_cluster(typename G::Gemm::Params& params,
                                        cudaStream_t stream) {
  using Kernel = typename G::Kernel;
  using Cluster = typename Kernel::DispatchPolicy::ClusterShape;
  static_assert(decltype(cute::size(Cluster{}))::value <= 8,
                "a cluster of more than 8 CTAs needs the non-portable "
                "cluster size attribute: launch it through CUTLASS's run()");
  const dim3 grid = G::Gemm::get_grid_shape(params);
  const dim3 cluster(cute::size<0>(Cluster{}), cute::size<1>(Cluster{}),
                     cute::size<2>(Cluster{}));
  if (cutlass::ClusterLauncher::check_cluster_dims(grid, cluster) !=
      cutlass::Status::kSuccess) {
    return cutlass::Status::kInvalid;
  }
  auto config = cutlass::ClusterLauncher::make_cluster_launch_config(
      grid, cluster, Kernel::get_block_shape(), Kernel::SharedStorageSize,
      stream);
  // attrs points into the returned struct: make it point into this copy.
  config.launch_config.attrs = config.launch_attribute;
  void* kernel_params[] = {&params};  // the launch copies them
  const cudaError_t error = cudaLaunchKernelExC(
      &config.launch_config,
      reinterpret_cast<const void*>(cutlass::device_kernel<Kernel>),
      kernel_params);
  return error == cudaSuccess ? cutlass::Status::kSuccess
                              : cutlass::Status::kErrorInternal;
}

// Launches G's kernel with built parameters: through CUTLASS's run(), or,
// for a kernel with a cluster under HostPath::kDirect (direct), without
// its per-launch attribute call.
template <typename G>
cutlass::Status launch_gemm(const typename G::Gemm::Params& params,
                            cudaStream_t stream, bool direct) {
  using Cluster = typename G::Kernel::DispatchPolicy::ClusterShape;
  // run() and the launch take the parameters by pointer and only read them.
  auto& launched = const_cast<typename G::Gemm::Params&>(params);
  if constexpr (decltype(cute::size(Cluster{}))::value > 1) {
    if (direct) {
      return launch_portable_cluster<G>(launched, stream);
    }
  }
  return G::Gemm::run(launched, stream);
}

// At most this many launches per call in windowed launches
// (launch_windows): a loose tile bound then widens the windows instead of
// launching many empty kernels (each a few microseconds).
constexpr uint64_t kMaxLaunchWindows = 32;

// Windowed launches (TileChoice::launch_waves): G's kernel once per window
// of the linear tile index, each launch given its window in a copy of the
// built parameters. The last window is open-ended, so a bound that undercounts
// loses no tile.
template <typename G>
const char* launch_windowed(CheckedGemm<G>& checked, const LaunchArgs& args,
                            const TileChoice& choice, cudaStream_t stream,
                            bool direct) {
  using Kernel = typename G::Kernel;
  using Tile = typename Kernel::TileShape;
  using Cluster = typename Kernel::DispatchPolicy::ClusterShape;
  typename G::Gemm::Params params = checked.gemm.params();
  const dim3 grid = G::Gemm::get_grid_shape(params);
  const Geometry& geo = args.geo;
  // A swapped kernel (GroupedGemmTf32MnB) tiles D^T: its tile's first
  // extent runs along N, its second along the grouped rows.
  constexpr int kRowsDim = G::kSwapAB ? 1 : 0;
  const uint64_t bound = tile_count_bound(
      uint64_t(geo.num_groups), geo.grouped == GroupedDim::kRows,
      uint64_t(geo.extent), uint64_t(geo.m), uint64_t(geo.n),
      cute::size<kRowsDim>(Tile{}), cute::size<1 - kRowsDim>(Tile{}),
      cute::size<kRowsDim>(Cluster{}), cute::size<1 - kRowsDim>(Cluster{}));
  const LaunchWindows windows = launch_windows(
      bound, uint64_t(grid.x) * grid.y * grid.z, uint64_t(choice.tile_chunk),
      uint64_t(choice.launch_waves), kMaxLaunchWindows);
  auto& problem = params.scheduler.problem_shapes_;
  for (uint64_t w = 0; w < windows.launches; ++w) {
    problem.window_begin = w * windows.tiles_per_launch;
    problem.window_end = w + 1 < windows.launches
        ? problem.window_begin + windows.tiles_per_launch
        : ~uint64_t(0);
    if (launch_gemm<G>(params, stream, direct) != cutlass::Status::kSuccess) {
      return "CUTLASS kernel launch failed";
    }
  }
  return nullptr;
}

template <typename G>
const char* launch_checked(CheckedGemm<G>& checked, cudaStream_t stream,
                           int log_swizzle, bool direct) {
  cutlass::Status status;
  if (log_swizzle > 0) {
    // The group scheduler reads the swizzle on the device only (each
    // group's tile counts are rounded there), so setting it in a copy of
    // the built parameters is enough; the grid does not depend on it.
    // This holds because gemm_arguments passes no host problem shapes:
    // with them the scheduler would bound the tiles by a host count
    // computed without the swizzle, and drop some.
    typename G::Gemm::Params params = checked.gemm.params();
    params.scheduler.log_swizzle_size_ = log_swizzle;
    status = launch_gemm<G>(params, stream, direct);
  } else {
    status = launch_gemm<G>(checked.gemm.params(), stream, direct);
  }
  if (status != cutlass::Status::kSuccess) {
    return "CUTLASS kernel launch failed";
  }
  return nullptr;
}

// Fills the per-group arguments from the offsets, then launches G. The
// kernel is checked by can_implement before anything is launched, so a
// refusal leaves the output untouched (an initialize or update failure,
// after the filling kernel's launch, does not; nor does a refusal of a
// token split's second kernel, after the first has run).
template <typename G>
const char* run_grouped_gemm(
    const LaunchArgs& args, const LeadingDims& ld,
    const TileChoice& choice = {}) {
  using ElementIn = typename G::ElementIn;
  using ElementOut = typename G::ElementOut;
  const float* fused_bias = args.bias.defined() && choice.bias_in_epilogue
      ? args.bias.const_data_ptr<float>()
      : nullptr;
  constexpr bool kChunkedShape =
      std::is_same_v<typename G::GroupShape, ChunkedGroupProblemShape>;
  const bool dynamic = kChunkedShape && choice.dynamic_tiles;
  Tensor storage;
  const CallStorage<G> call = carve_call_storage<G>(
      storage, args.geo.num_groups, fused_bias != nullptr,
      gemm_workspace_bytes<G>(args), dynamic);
  const DeviceArguments<G>& dev = call.dev;
  CheckedGemm<G> gemm;
  if (const char* error = check_gemm<G>(
          args, dev, dev.shapes, call.workspace, choice.raster,
          choice.tile_chunk, call.tile_counter, gemm)) {
    return error;
  }
  // The fill goes first, and CUTLASS's host-side initialisation overlaps
  // it (HostPath::kClassic: initialised on every call, before the fill,
  // for A/B runs).
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const bool classic = choice.host_path == HostPath::kClassic;
  if (classic) {
    if (const char* error = set_checked_parameters(gemm, stream, true)) {
      return error;
    }
  }
  const auto* a = reinterpret_cast<const ElementIn*>(args.a.const_data_ptr());
  const auto* b = reinterpret_cast<const ElementIn*>(args.b.const_data_ptr());
  auto* d = reinterpret_cast<ElementOut*>(args.out.mutable_data_ptr());
  Sm90ArgumentWriter<G> writer{a, b, d, ld, dev, fused_bias, args.geo.n};
  writer.split_rows = choice.split_rows;
  writer.split_past = choice.split_past;
  // The epilogue adds the bias; the fill writes it into k = 0 groups (the
  // first launch's fill only, under a token split).
  const bool fill_writes_output = choice.split_rows == 0 || !choice.split_past;
  if (!launch_fill_group_arguments(args, writer, choice.bias_in_epilogue,
                                   fill_writes_output)) {
    return "launching the argument-filling kernel failed";
  }
  // Stream-ordered, so a captured graph resets it on every replay.
  if (dynamic && cudaMemsetAsync(call.tile_counter, 0, sizeof(uint32_t),
                                 stream) != cudaSuccess) {
    return "resetting the dynamic walk's tile counter failed";
  }
  if (!classic) {
    if (const char* error = set_checked_parameters(gemm, stream, false)) {
      return error;
    }
  }
  const bool direct = choice.host_path == HostPath::kDirect;
  if constexpr (kChunkedShape) {
    if (choice.launch_waves > 0) {
      return launch_windowed(gemm, args, choice, stream, direct);
    }
  }
  return launch_checked(gemm, stream, choice.log_swizzle, direct);
}

// Which units build the wider store tiles, so the others' build time does
// not grow. The large config's: 16-bit wgrad's units (A column-major, B
// row-major, output in the input dtype); the default rule picks them for
// calls grouped along K only. The large_solo config's: the 16-bit units
// with row-major A and output in the input dtype (fwd and dgrad, either
// major of the weights); the default rule picks them for row-grouped calls
// only, which always settle to row-major A. Under a pinned
// OVERLAP_OPS_SM90_STORE_TILE=64 or 128, calls that reach either config in
// other units (float32 output or inputs, other majors) raise; a 3d x 3d
// call with those majors runs them; calls on other configs ignore it.
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
constexpr bool kBuildsStoreTiles = !std::is_same_v<In, float> &&
    std::is_same_v<In, Out> && !kARowMajor && kBRowMajor;
template <typename In, typename Out, bool kARowMajor>
constexpr bool kBuildsSoloStoreTiles =
    !std::is_same_v<In, float> && std::is_same_v<In, Out> && kARowMajor;

// Base through kCols-column store tiles, in the chunked tile order where
// the call takes one (TileChoice::tile_chunk, built on the large config
// only; the dispatcher refuses a pinned chunk on any other config before
// it gets here).
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor,
          template <typename> class KTile, typename Base, int kCols>
const char* run_store_width(const LaunchArgs& args, const LeadingDims& ld,
                            TileChoice choice) {
  using Stored = StoreTileConfig<Base, kCols>;
  // The dynamic walk (TileChoice::dynamic_tiles) and windowed launches
  // (launch_waves): built on large_solo with 64-column store tiles, and
  // on large through the chunked order's kernels below; the dispatcher
  // refuses them elsewhere.
  if constexpr (std::is_same_v<Base, LargeSoloTileConfig> && kCols == 64) {
    if (choice.dynamic_tiles || choice.launch_waves > 0) {
      return run_grouped_gemm<GroupedGemm<In, Out, kARowMajor, kBRowMajor,
                                          KTile<TileChunked<Stored>>>>(
          args, ld, choice);
    }
  }
  if constexpr (std::is_same_v<Base, LargeTileConfig>) {
    if (choice.tile_chunk > 1 || choice.launch_waves > 0) {
      return run_grouped_gemm<GroupedGemm<In, Out, kARowMajor, kBRowMajor,
                                          KTile<TileChunked<Stored>>>>(
          args, ld, choice);
    }
  }
  return run_grouped_gemm<
      GroupedGemm<In, Out, kARowMajor, kBRowMajor, KTile<Stored>>>(args, ld,
                                                                   choice);
}

template <typename In, typename Out, bool kARowMajor, bool kBRowMajor,
          template <typename> class KTile, typename Base, bool kBuilt>
const char* run_store_tile(const LaunchArgs& args, const LeadingDims& ld,
                           TileChoice choice, const char* unbuilt) {
  if constexpr (kBuilt) {
    // A K-tile wrapper that dropped EpilogueTile would silently run
    // CUTLASS's subtile (HalfK does: it is for TF32, never built here).
    static_assert(std::is_same_v<
                  typename EpilogueTileOf<
                      KTile<StoreTileConfig<Base, 64>>>::type,
                  cute::Shape<cute::_128, cute::_64>>);
    if (choice.store_tile_cols == 64) {
      return run_store_width<In, Out, kARowMajor, kBRowMajor, KTile, Base,
                             64>(args, ld, choice);
    }
    if (choice.store_tile_cols == 128) {
      return run_store_width<In, Out, kARowMajor, kBRowMajor, KTile, Base,
                             128>(args, ld, choice);
    }
    return "store_tile_cols must be 0, 64 or 128";
  } else {
    return unbuilt;
  }
}

template <typename In, typename Out, bool kARowMajor, bool kBRowMajor,
          template <typename> class KTile>
const char* run_tile_config(const LaunchArgs& args, const LeadingDims& ld,
                            TileChoice choice) {
  using Small =
      GroupedGemm<In, Out, kARowMajor, kBRowMajor, KTile<SmallTileConfig>>;
  using Medium =
      GroupedGemm<In, Out, kARowMajor, kBRowMajor, KTile<MediumTileConfig>>;
  using Large =
      GroupedGemm<In, Out, kARowMajor, kBRowMajor, KTile<LargeTileConfig>>;
  switch (choice.config) {
    case TileConfig::kSmall:
      return run_grouped_gemm<Small>(args, ld, choice);
    case TileConfig::kMedium:
      return run_grouped_gemm<Medium>(args, ld, choice);
    case TileConfig::kLargeSolo:
      if (choice.store_tile_cols != 0) {
        return run_store_tile<
            In, Out, kARowMajor, kBRowMajor, KTile, LargeSoloTileConfig,
            kBuildsSoloStoreTiles<In, Out, kARowMajor>>(
            args, ld, choice,
            "OVERLAP_OPS_SM90_STORE_TILE on the large_solo config is built "
            "only for bf16 -> bf16 and fp16 -> fp16 calls with row-major A "
            "(fwd and dgrad); this call reaches it otherwise");
      }
      // TF32 windowed launches (launch_waves): the chunked problem
      // shape's kernel, built with the short K tile only
      // (tf32_windows_built: the dispatcher never asks it of the long one).
      if constexpr (std::is_same_v<In, float> &&
                    std::is_same_v<KTile<LargeSoloTileConfig>,
                                   HalfK<LargeSoloTileConfig>>) {
        if (choice.launch_waves > 0) {
          return run_grouped_gemm<
              GroupedGemm<In, Out, kARowMajor, kBRowMajor,
                          TileChunked<KTile<LargeSoloTileConfig>>>>(
              args, ld, choice);
        }
      }
      return run_grouped_gemm<GroupedGemm<
          In, Out, kARowMajor, kBRowMajor, KTile<LargeSoloTileConfig>>>(
          args, ld, choice);
    case TileConfig::kWide:
      // 16-bit only: not built for TF32, whose unit already holds eight
      // kernels (never measured there).
      if constexpr (!std::is_same_v<In, float>) {
        return run_grouped_gemm<GroupedGemm<
            In, Out, kARowMajor, kBRowMajor, KTile<WideTileConfig>>>(
            args, ld, choice);
      } else {
        return "OVERLAP_OPS_SM90_TILE=wide is built for 16-bit inputs only";
      }
    default:
      if (choice.store_tile_cols != 0) {
        return run_store_tile<
            In, Out, kARowMajor, kBRowMajor, KTile, LargeTileConfig,
            kBuildsStoreTiles<In, Out, kARowMajor, kBRowMajor>>(
            args, ld, choice,
            "OVERLAP_OPS_SM90_STORE_TILE is built only for bf16 -> bf16 and "
            "fp16 -> fp16 calls grouped along K (wgrad: column-major A, "
            "row-major B); this call reaches the large config otherwise");
      }
      return run_grouped_gemm<Large>(args, ld, choice);
  }
}

template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm90(const LaunchArgs& args, const LeadingDims& ld,
                     TileChoice choice) {
  if constexpr (std::is_same_v<In, float>) {
    if (choice.tf32_short_k) {
      return run_tile_config<In, Out, kARowMajor, kBRowMajor, HalfK>(
          args, ld, choice);
    }
  }
  return run_tile_config<In, Out, kARowMajor, kBRowMajor, SameK>(
      args, ld, choice);
}

#define OVERLAP_OPS_SM90_INSTANTIATE(In, Out, ARow, BRow)            \
  template const char* run_sm90<In, Out, ARow, BRow>(               \
      const LaunchArgs&, const LeadingDims&, TileChoice);

}  // namespace at::native::grouped_mm::sm90
