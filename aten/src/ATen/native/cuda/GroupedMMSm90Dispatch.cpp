// Chooses and launches a Hopper grouped GEMM from host metadata only:
// dtype, operand majors and alignment, and host-known sizes. Operands whose
// layout the TMA kernels cannot read are re-laid out once (a copy, no sync).

#if !defined(USE_ROCM)  // CUDA only, like GroupedMMSm90.cuh
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMOperandLayout.h>
#include <ATen/native/cuda/GroupedMMSm90.h>
#include <ATen/native/cuda/GroupedMMTf32Route.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>

namespace at::native::grouped_mm {
namespace sm90 {
namespace {

constexpr int64_t kTmaAlignBytes = 16;
static_assert(kTf32KTmaPad * sizeof(float) == kTmaAlignBytes);
constexpr int64_t kTmaAlignFloats = kTmaAlignBytes / sizeof(float);

// TF32 grouped along K: the rule's pad (tf32_k_group_pad), or 16 bytes
// where lines would widen the copies past int32.
int64_t k_group_pad_for(const Geometry& geo) {
  const int64_t pad = tf32_k_group_pad(geo.extent, geo.num_groups);
  return padded_k_extent(geo.extent, geo.num_groups, pad) >
          std::numeric_limits<int32_t>::max()
      ? kTf32KTmaPad
      : pad;
}

// The majors the kernels read. TF32 WGMMA reads K-major operands only (A
// row-major, B column-major), except B on the direct read (row-major);
// 16-bit calls follow the shared rules (GroupedMMOperandLayout.h).
std::optional<Major> needed_a_major(GroupedDim grouped, bool tf32) {
  return tf32 ? std::optional(Major::kRow) : required_a_major(grouped);
}

std::optional<Major> needed_b_major(GroupedDim grouped, bool tf32,
                                    bool mn_b_direct) {
  if (!tf32) {
    return required_b_major(grouped);
  }
  return mn_b_direct ? Major::kRow : Major::kCol;
}

// TF32 on Hopper: the SM90 kernels, unless the SM80 ones (which read either
// major) beat the SM90 ones plus the copies only the SM90 path makes
// (GroupedMMTf32Route.h), and can run the call. A forced
// TORCH_GROUPED_MM_BACKEND=sm90 keeps SM90 wherever it can run.
bool sm90_takes_tf32(const Geometry& geo, std::optional<Major> need_a,
                     std::optional<Major> need_b) {
  const bool grouped_along_k = geo.grouped == GroupedDim::kReduction;
  if (grouped_along_k &&
      padded_k_extent(geo.extent, geo.num_groups, k_group_pad_for(geo)) >
          std::numeric_limits<int32_t>::max()) {
    return false;
  }
  if (requested_backend() == Backend::kSm90 ||
      !sm80_tile_count_fits_int32(geo)) {
    return true;
  }
  if (grouped_along_k) {
    // Both operands are copied; the SM80 kernels read them as they are.
    return hopper_tf32_family({true, geo.m, geo.extent, geo.n, geo.num_groups,
                               true, true}) == Tf32Family::kSm90;
  }
  const SettledMajors sm90 = settled_majors(geo.a, geo.b, need_a, need_b);
  const SettledMajors sm80 = settled_majors(
      geo.a, geo.b, required_a_major(geo.grouped),
      required_b_major(geo.grouped));
  const int64_t rows = geo.grouped == GroupedDim::kRows
      ? geo.extent
      : geo.m * std::max<int64_t>(1, geo.num_groups);
  const Tf32Work work{
      grouped_along_k, rows, geo.k, geo.n, geo.num_groups,
      copied_to(geo.a, sm90.a) && !copied_to(geo.a, sm80.a),
      copied_to(geo.b, sm90.b) && !copied_to(geo.b, sm80.b)};
  return hopper_tf32_family(work) == Tf32Family::kSm90;
}

// TF32 calls grouped along rows with N-major weights that TMA can read as
// they are run the swapped kernel (GroupedMMSm90Tf32MnB.cuh) instead of a
// transposing copy of the weights or the SM80 kernels.
bool tf32_mn_b_direct(const LaunchArgs& args) {
  const Geometry& geo = args.geo;
  return tf32_mn_b_direct_wins(geo.extent, geo.num_groups,
                               major_of(geo.a) == Major::kRow) &&
      geo.grouped == GroupedDim::kRows && major_of(geo.b) == Major::kRow &&
      aligned(args.b, geo.b, Major::kRow, kTmaAlignFloats);
}

// The current device's peak DRAM bandwidth in bytes per second (memory
// clock x bus width, two transfers a clock), read once per device.
double peak_dram_bytes_per_second() {
  constexpr int kCachedDevices = 64;
  static std::array<std::atomic<double>, kCachedDevices> cached{};
  const int device = c10::cuda::current_device();
  if (device < kCachedDevices) {
    const double known = cached[device].load(std::memory_order_relaxed);
    if (known > 0) {
      return known;
    }
  }
  int clock_khz = 0;
  int bus_bits = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz,
                                        cudaDevAttrMemoryClockRate, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(
      &bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  const double bandwidth = 2.0 * clock_khz * 1e3 * bus_bits / 8;
  if (device < kCachedDevices) {
    cached[device].store(bandwidth, std::memory_order_relaxed);
  }
  return bandwidth;
}

// The direct read's token tile (GroupedMMTf32Route.h, tf32_mn_b_*_wins).
MnBTile mn_b_tile_for(const Geometry& geo) {
  if (tf32_mn_b_token_split_wins(geo.extent, geo.num_groups)) {
    return MnBTile::kSplit;
  }
  if (tf32_mn_b_narrow_wins(geo.extent, geo.num_groups)) {
    return MnBTile::kNarrow;
  }
  return tf32_mn_b_cluster_wins(geo.extent, geo.num_groups,
                                peak_dram_bytes_per_second())
      ? MnBTile::kCluster
      : MnBTile::kWide;
}

// The grouped dimension's mean extent per group (rounded down), from what
// the host knows: rows per group when grouped along rows, tokens per group
// when grouped along K.
int64_t mean_group_extent(const Geometry& geo) {
  return geo.extent / std::max<int64_t>(1, geo.num_groups);
}

// A group's m as the host knows it: the mean rows per group of a
// row-grouped call, else every group's m.
int64_t host_group_m(const Geometry& geo) {
  return geo.grouped == GroupedDim::kRows ? mean_group_extent(geo) : geo.m;
}

// A token split: the groups that fit one 128-token tile, then the larger
// ones on the 256-token kernel, each walked in its own order. Both kernels
// take the same operands, so the second is not expected to refuse once the
// first has launched.
const char* run_tf32_mn_b_split(const LaunchArgs& args, const LeadingDims& ld,
                                TileChoice choice) {
  choice.split_rows = kMnBNarrowTokens;
  choice.split_past = false;
  choice.raster = swapped_raster_order_for(true);
  if (const char* error = run_sm90_tf32_mn_b_narrow(args, ld, choice)) {
    return error;
  }
  choice.split_past = true;
  choice.raster = swapped_raster_order_for(false);
  return run_sm90_tf32_mn_b(args, ld, choice);
}

const char* run_tf32_mn_b(const LaunchArgs& args, const LeadingDims& ld,
                          const TileChoice& choice, MnBTile tile) {
  switch (tile) {
    case MnBTile::kSplit:
      return run_tf32_mn_b_split(args, ld, choice);
    case MnBTile::kNarrow:
      return run_sm90_tf32_mn_b_narrow(args, ld, choice);
    case MnBTile::kCluster:
      return run_sm90_tf32_mn_b_cluster(args, ld, choice);
    default:
      return run_sm90_tf32_mn_b(args, ld, choice);
  }
}

template <typename In, typename Out>
const char* run_for_majors(const LaunchArgs& args, const LeadingDims& ld,
                           Major a, Major b, const TileChoice& choice) {
  if constexpr (std::is_same_v<In, float>) {
    return run_sm90<float, float, true, false>(args, ld, choice);
  } else {
    if (a == Major::kRow && b == Major::kRow) {
      return run_sm90<In, Out, true, true>(args, ld, choice);
    }
    if (a == Major::kRow) {
      return run_sm90<In, Out, true, false>(args, ld, choice);
    }
    return run_sm90<In, Out, false, true>(args, ld, choice);
  }
}

const char* run_for_dtypes(const LaunchArgs& args, const LeadingDims& ld,
                           Major a, Major b, const TileChoice& choice) {
  const bool out_fp32 = args.out.scalar_type() == kFloat;
  switch (args.a.scalar_type()) {
    case kBFloat16:
      return out_fp32
          ? run_for_majors<c10::BFloat16, float>(args, ld, a, b, choice)
          : run_for_majors<c10::BFloat16, c10::BFloat16>(args, ld, a, b,
                                                          choice);
    case kHalf:
      return out_fp32
          ? run_for_majors<c10::Half, float>(args, ld, a, b, choice)
          : run_for_majors<c10::Half, c10::Half>(args, ld, a, b, choice);
    default:
      return run_for_majors<float, float>(args, ld, a, b, choice);
  }
}

}  // namespace

TileChoice tile_choice_for(const LaunchArgs& args, TileConfig config,
                           std::optional<MnBTile> mn_b_tile) {
  const Geometry& geo = args.geo;
  const ScalarType in = args.a.scalar_type();
  TileChoice choice;
  choice.config = config;
  const StoreTileQuery store{
      config, in != kFloat && args.out.scalar_type() == in,
      geo.grouped == GroupedDim::kReduction, geo.grouped == GroupedDim::kRows,
      mean_group_extent(geo)};
  choice.store_tile_cols = store_tile_cols_for(store);
  choice.tile_chunk =
      tile_chunk_for(store, choice.store_tile_cols, geo.m, geo.n);
  choice.raster = mn_b_tile
      ? swapped_raster_order_for(*mn_b_tile == MnBTile::kNarrow)
      : raster_order_for(host_group_m(geo), geo.n);
  if (in == kFloat) {
    // A token split runs the 128-token kernel too, where no windows are
    // built.
    choice.launch_waves = tf32_launch_waves_for(
        {mn_b_tile.has_value(),
         mn_b_tile == MnBTile::kNarrow || mn_b_tile == MnBTile::kSplit,
         mn_b_tile == MnBTile::kCluster, config, host_group_m(geo)});
  }
  return choice;
}

std::optional<Plan> plan_for(const LaunchArgs& args) {
  const Geometry& geo = args.geo;
  const ScalarType in = args.a.scalar_type();
  if (!sm90_available_for(in) || geo.grouped == GroupedDim::kCols ||
      !fits_int32(geo)) {
    return std::nullopt;
  }
  const bool tf32 = in == kFloat;
  Plan plan;
  if (tf32) {
    if (tf32_mn_b_direct(args)) {
      plan.mn_b_tile = mn_b_tile_for(geo);
    } else if (!sm90_takes_tf32(geo, needed_a_major(geo.grouped, true),
                                needed_b_major(geo.grouped, true, false))) {
      return std::nullopt;  // the SM80 kernels take it
    }
    if (geo.grouped == GroupedDim::kReduction) {
      plan.k_group_pad = k_group_pad_for(geo);
    }
  }
  const TileConfig config = tile_config_for(
      {geo.grouped == GroupedDim::kRows, host_group_m(geo), tf32});
  plan.tiles = tile_choice_for(args, config, plan.mn_b_tile);
  return plan;
}

bool run_plan(LaunchArgs& args, const Plan& plan) {
  const bool tf32 = args.a.scalar_type() == kFloat;
  const bool padded_k = plan.k_group_pad > 0;
  if (padded_k && !output_aligned(args, kTmaAlignBytes)) {
    return false;  // before the copies: the output decides alone here
  }
  const SettledOperands ops = padded_k
      ? settle_k_padded_operands(args, plan.k_group_pad)
      : settle_operands(
            args, needed_a_major(args.geo.grouped, tf32),
            needed_b_major(args.geo.grouped, tf32,
                           plan.mn_b_tile.has_value()));
  if (!operands_aligned(args, ops, kTmaAlignBytes)) {
    return false;
  }
  use_settled_operands(args, ops);
  const LeadingDims ld{leading_dim(ops.sa, ops.a_major),
                       leading_dim(ops.sb, ops.b_major), args.geo.d.row};
  const char* error = plan.mn_b_tile
      ? run_tf32_mn_b(args, ld, plan.tiles, *plan.mn_b_tile)
      : run_for_dtypes(args, ld, ops.a_major, ops.b_major, plan.tiles);
  // Nothing to finish: the epilogue added the bias, the fill wrote the
  // k = 0 groups and the tail.
  TORCH_CHECK(error == nullptr, "grouped_mm: SM90 kernel: ", error);
  return true;
}

}  // namespace sm90

bool sm90_available_for(ScalarType input_dtype) {
  const Backend requested = requested_backend();
  if (requested != Backend::kAuto && requested != Backend::kSm90) {
    return false;
  }
  if (at::cuda::getCurrentDeviceProperties()->major != 9) {
    return false;
  }
  if (!hopper_kernels_built()) {
    // Their stubs would return garbage: the SM80 kernels take the call
    // (sm80_kernels_by_default), unless this one was forced.
    TORCH_CHECK(requested != Backend::kSm90,
                "grouped_mm: TORCH_GROUPED_MM_BACKEND=sm90, but this build "
                "has no sm_90a code for the Hopper kernels (add 9.0 to "
                "the CUDA arch list)");
    return false;
  }
  return input_dtype != kFloat || at::globalContext().allowTF32CuBLAS();
}

bool try_launch_sm90_grouped_mm(LaunchArgs& args) {
  const std::optional<sm90::Plan> plan = sm90::plan_for(args);
  return plan.has_value() && sm90::run_plan(args, *plan);
}

}  // namespace at::native::grouped_mm
#endif  // !defined(USE_ROCM)
