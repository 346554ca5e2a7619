#pragma once

// Hopper grouped GEMM: CUTLASS 3.x pointer-array kernels (TMA loads,
// warp-specialised WGMMA mainloop, persistent group tile scheduler). The
// per-group problem shapes, pointers and strides are written on the device by
// fill_group_arguments from the offsets, so the host never learns the group
// sizes. Included only by the GroupedMMSm90*.cu instantiation files.
// CUDA only: in the ROCm build, which hipifies them, they instantiate nothing.
#if defined(USE_ROCM)
#define GROUPED_MM_SM90_INSTANTIATE(In, Out, ARow, BRow)
#else

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

// The tile configs of GroupedMMTileChoice.h's TileConfig.
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

// Wider store tiles (TileChoice::store_tile_cols): a 128x256 config storing
// its output tile through 128 x kCols subtiles instead of CUTLASS's choice
// (128x32 for 16-bit output). Each subtile costs two barriers of the
// epilogue warp groups and one TMA store, so wider subtiles issue fewer,
// larger stores; wgrad with few tokens per group mostly writes its output.
template <typename Base, int kCols>
struct StoreTileConfig : Base {
  using EpilogueTile = cute::Shape<cute::_128, cute::Int<kCols>>;
};

// TileChunked: a config whose kernel takes the chunked tile order and
// windowed launches (GroupedMMTileOrder.h): the same tiles and epilogue,
// with ChunkedGroupProblemShape selecting the scheduler.
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
// the bytes: the 128x256 tile would fit two stages where 16-bit fits four.
// HalfK keeps the bytes per stage for TF32, and with them the stages.
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

// A unit's configs: HalfK for TF32, as they are for 16-bit inputs.
template <typename In, typename Config>
using KTileFor =
    std::conditional_t<std::is_same_v<In, float>, HalfK<Config>, Config>;

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
  // the epilogue's padding: no config loses a mainloop stage.
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
    RasterOrder raster = RasterOrder::kAlongM, int tile_chunk = 1) {
  typename G::GroupShape problem{};
  problem.num_groups = static_cast<int>(args.geo.num_groups);
  problem.problem_shapes = shapes;
  problem.host_problem_shapes = nullptr;
  if constexpr (std::is_same_v<typename G::GroupShape,
                               ChunkedGroupProblemShape>) {
    problem.tile_chunk = tile_chunk;
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
};

template <typename G>
CallStorage<G> carve_call_storage(
    Tensor& storage, int64_t groups, bool bias, int64_t workspace_bytes) {
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
    RasterOrder raster, int tile_chunk, CheckedGemm<G>& checked) {
  checked.arguments = gemm_arguments<G>(args, dev, shapes, raster, tile_chunk);
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
cutlass::Status set_parameters(CheckedGemm<G>& checked, cudaStream_t stream) {
  constexpr int kMaxDevices = 64;
  static std::atomic<uint64_t> attribute_set{0};  // a bit per device
  const int device = checked.arguments.hw_info.device_id;
  const uint64_t bit =
      device >= 0 && device < kMaxDevices ? uint64_t(1) << device : 0;
  if (bit != 0 && (attribute_set.load(std::memory_order_acquire) & bit)) {
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
const char* set_checked_parameters(CheckedGemm<G>& checked,
                                   cudaStream_t stream) {
  if (set_parameters(checked, stream) !=
      cutlass::Status::kSuccess) {
    return "CUTLASS initialize failed";
  }
  return nullptr;
}

// Launches a kernel with a cluster as CUTLASS's run() does, but without
// ClusterLauncher::init: run() sets the kernel's non-portable cluster size
// attribute on every launch, a cudaFuncSetAttribute that host-bound calls
// pay for. A cluster of at most 8 CTAs is portable and needs no attribute.
// Same grid, block, shared memory and cluster shape as run().
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
// for a kernel with a cluster, without its per-launch attribute call.
template <typename G>
cutlass::Status launch_gemm(const typename G::Gemm::Params& params,
                            cudaStream_t stream) {
  using Cluster = typename G::Kernel::DispatchPolicy::ClusterShape;
  // run() and the launch take the parameters by pointer and only read them.
  auto& launched = const_cast<typename G::Gemm::Params&>(params);
  if constexpr (decltype(cute::size(Cluster{}))::value > 1) {
    return launch_portable_cluster<G>(launched, stream);
  } else {
    return G::Gemm::run(launched, stream);
  }
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
                            const TileChoice& choice, cudaStream_t stream) {
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
    if (launch_gemm<G>(params, stream) != cutlass::Status::kSuccess) {
      return "CUTLASS kernel launch failed";
    }
  }
  return nullptr;
}

// Fills the per-group arguments from the offsets, then launches G. The
// kernel is checked by can_implement before anything is launched, so a
// refusal leaves the output untouched (an initialize or update failure,
// after the filling kernel's launch, does not; nor does a refusal of a
// token split's second kernel, after the first has run).
template <typename G>
const char* run_grouped_gemm(const LaunchArgs& args, const LeadingDims& ld,
                             const TileChoice& choice) {
  using ElementIn = typename G::ElementIn;
  using ElementOut = typename G::ElementOut;
  const float* bias =
      args.bias.defined() ? args.bias.const_data_ptr<float>() : nullptr;
  Tensor storage;
  const CallStorage<G> call = carve_call_storage<G>(
      storage, args.geo.num_groups, bias != nullptr,
      gemm_workspace_bytes<G>(args));
  const DeviceArguments<G>& dev = call.dev;
  CheckedGemm<G> gemm;
  if (const char* error = check_gemm<G>(args, dev, dev.shapes, call.workspace,
                                        choice.raster, choice.tile_chunk,
                                        gemm)) {
    return error;
  }
  const auto* a = reinterpret_cast<const ElementIn*>(args.a.const_data_ptr());
  const auto* b = reinterpret_cast<const ElementIn*>(args.b.const_data_ptr());
  auto* d = reinterpret_cast<ElementOut*>(args.out.mutable_data_ptr());
  Sm90ArgumentWriter<G> writer{a, b, d, ld, dev, bias, args.geo.n};
  writer.split_rows = choice.split_rows;
  writer.split_past = choice.split_past;
  // The epilogue adds the bias; the fill writes it into k = 0 groups (the
  // first launch's fill only, under a token split).
  const bool fill_writes_output = choice.split_rows == 0 || !choice.split_past;
  if (!launch_fill_group_arguments(args, writer, /*bias_fused=*/true,
                                   fill_writes_output)) {
    return "launching the argument-filling kernel failed";
  }
  // CUTLASS's host-side setup runs after the fill's launch, so it overlaps
  // the fill on the device.
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (const char* error = set_checked_parameters(gemm, stream)) {
    return error;
  }
  if constexpr (std::is_same_v<typename G::GroupShape,
                               ChunkedGroupProblemShape>) {
    if (choice.launch_waves > 0) {
      return launch_windowed(gemm, args, choice, stream);
    }
  }
  if (launch_gemm<G>(gemm.gemm.params(), stream) !=
      cutlass::Status::kSuccess) {
    return "CUTLASS kernel launch failed";
  }
  return nullptr;
}

// The kernels a unit (one dtype pair and pair of operand majors) builds:
// those the rules of GroupedMMTileChoice.h pick for the calls that settle
// to it, so no unit builds a kernel no call runs. Row-grouped calls (fwd,
// dgrad) settle to row-major A and run small, wide (16-bit) or large_solo;
// calls grouped along K (wgrad) settle to column-major A and row-major B,
// and batched calls to any majors, and run small, medium or large. The
// wider store tiles and the chunked order are built where their rules pick
// them: 16-bit calls whose output is in the input dtype.
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
struct UnitKernels {
  static constexpr bool kTf32 = std::is_same_v<In, float>;
  static constexpr bool kSameDtypeOut = !kTf32 && std::is_same_v<In, Out>;
  static constexpr bool kRowGroupedConfigs = kARowMajor;
  static constexpr bool kKGroupedStoreTiles =
      kSameDtypeOut && !kARowMajor && kBRowMajor;

  template <typename Config>
  using Gemm = GroupedGemm<In, Out, kARowMajor, kBRowMajor,
                           KTileFor<In, Config>>;

  static constexpr const char* kNotBuilt =
      "this tile config, store tile or tile order is not built for the "
      "call's dtypes and operand majors";

  // The large config: CUTLASS's store tiles, or 16-bit wgrad's wider ones,
  // in the chunked order where the call takes it (128 columns only).
  static const char* run_large(const LaunchArgs& args, const LeadingDims& ld,
                               const TileChoice& choice) {
    if (choice.store_tile_cols == 0) {
      return run_grouped_gemm<Gemm<LargeTileConfig>>(args, ld, choice);
    }
    if constexpr (kKGroupedStoreTiles) {
      using Stored64 = StoreTileConfig<LargeTileConfig, 64>;
      using Stored128 = StoreTileConfig<LargeTileConfig, 128>;
      if (choice.store_tile_cols == 64 && choice.tile_chunk == 1) {
        return run_grouped_gemm<Gemm<Stored64>>(args, ld, choice);
      }
      if (choice.store_tile_cols == 128) {
        return choice.tile_chunk > 1
            ? run_grouped_gemm<Gemm<TileChunked<Stored128>>>(args, ld, choice)
            : run_grouped_gemm<Gemm<Stored128>>(args, ld, choice);
      }
    }
    return kNotBuilt;
  }

  // large_solo, row-grouped calls only: 64-column store tiles for 16-bit
  // output in the input dtype, CUTLASS's for float32 output; for TF32, the
  // chunked problem shape where the call takes windowed launches.
  static const char* run_large_solo(const LaunchArgs& args,
                                    const LeadingDims& ld,
                                    const TileChoice& choice) {
    if constexpr (kTf32) {
      if (choice.store_tile_cols == 0) {
        return choice.launch_waves > 0
            ? run_grouped_gemm<GroupedGemm<
                  In, Out, kARowMajor, kBRowMajor,
                  TileChunked<HalfK<LargeSoloTileConfig>>>>(args, ld, choice)
            : run_grouped_gemm<Gemm<LargeSoloTileConfig>>(args, ld, choice);
      }
    } else if constexpr (kRowGroupedConfigs && kSameDtypeOut) {
      if (choice.store_tile_cols == kSoloStoreTileCols) {
        return run_grouped_gemm<
            Gemm<StoreTileConfig<LargeSoloTileConfig, kSoloStoreTileCols>>>(
            args, ld, choice);
      }
    } else if constexpr (kRowGroupedConfigs) {
      if (choice.store_tile_cols == 0) {
        return run_grouped_gemm<Gemm<LargeSoloTileConfig>>(args, ld, choice);
      }
    }
    return kNotBuilt;
  }

  static const char* run(const LaunchArgs& args, const LeadingDims& ld,
                         const TileChoice& choice) {
    switch (choice.config) {
      case TileConfig::kSmall:
        return run_grouped_gemm<Gemm<SmallTileConfig>>(args, ld, choice);
      case TileConfig::kMedium:
        return run_grouped_gemm<Gemm<MediumTileConfig>>(args, ld, choice);
      case TileConfig::kLargeSolo:
        return run_large_solo(args, ld, choice);
      case TileConfig::kWide:
        // 16-bit row-grouped calls only.
        if constexpr (!kTf32 && kRowGroupedConfigs) {
          return run_grouped_gemm<Gemm<WideTileConfig>>(args, ld, choice);
        } else {
          return kNotBuilt;
        }
      default:
        return run_large(args, ld, choice);
    }
  }
};

template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm90(const LaunchArgs& args, const LeadingDims& ld,
                     TileChoice choice) {
  return UnitKernels<In, Out, kARowMajor, kBRowMajor>::run(args, ld, choice);
}

#define GROUPED_MM_SM90_INSTANTIATE(In, Out, ARow, BRow)            \
  template const char* run_sm90<In, Out, ARow, BRow>(               \
      const LaunchArgs&, const LeadingDims&, TileChoice);

}  // namespace at::native::grouped_mm::sm90
#endif  // defined(USE_ROCM)
