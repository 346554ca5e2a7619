// Chooses and launches a Hopper grouped GEMM from host metadata only:
// dtype, operand majors and alignment, and host-known sizes. Operands whose
// layout the TMA kernels cannot read are re-laid out once (a copy, no sync).

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMOperandLayout.h>
#include <ATen/native/cuda/GroupedMMSm90.h>
#include <ATen/native/cuda/GroupedMMTf32Route.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace at::native::grouped_mm {
namespace {

constexpr int64_t kTmaAlignBytes = 16;
static_assert(kTf32KTmaPad * sizeof(float) == kTmaAlignBytes);

// TF32 grouped along K: the K-major copies start each group at a multiple
// of this many floats (settle_k_padded_operands), by the route's rule
// (tf32_k_group_pad; 16 bytes where lines would widen the copies past
// int32, which 16 bytes might not) or OVERLAP_OPS_SM90_TF32_K_PAD=16|128
// bytes pinned (for A/B runs).
int64_t chosen_k_group_pad(const Geometry& geo) {
  switch (env_choice("OVERLAP_OPS_SM90_TF32_K_PAD", {"16", "128"})) {
    case 1:
      return kTf32KTmaPad;
    case 2:
      return kTf32KLinePad;
    default: {
      const int64_t pad = tf32_k_group_pad(geo.extent, geo.num_groups);
      return padded_k_extent(geo.extent, geo.num_groups, pad) >
              std::numeric_limits<int32_t>::max()
          ? kTf32KTmaPad
          : pad;
    }
  }
}

// TF32 WGMMA reads K-major operands only (A row-major, B column-major);
// otherwise the shared rules (GroupedMMOperandLayout.h) apply. Grouped
// along K, TF32 takes padded copies (settle_k_padded_operands).
std::optional<Major> sm90_a_major(GroupedDim grouped, bool tf32) {
  return tf32 ? std::optional(Major::kRow) : required_a_major(grouped);
}

std::optional<Major> sm90_b_major(GroupedDim grouped, bool tf32) {
  return tf32 ? std::optional(Major::kCol) : required_b_major(grouped);
}

// TF32 grouped along K on the SM90 kernels (padded copies of A and B): the
// route chooses them where they win (the default, on);
// OVERLAP_OPS_SM90_TF32_PADDED_K=off keeps the SM80 kernels (A/B runs). A
// forced OVERLAP_OPS_GROUPED_MM_BACKEND=sm90 takes them either way.
bool padded_k_allowed() {
  return env_choice("OVERLAP_OPS_SM90_TF32_PADDED_K", {"on", "off"}) != 2;
}

// TF32 on Hopper: the SM90 kernels, unless the SM80 ones (which read either
// major) beat the SM90 ones plus the copies only the SM90 path makes
// (GroupedMMTf32Route.h), and can run the call. A forced
// OVERLAP_OPS_GROUPED_MM_BACKEND=sm90 keeps SM90 wherever it can run.
bool sm90_takes_tf32(const Geometry& geo, std::optional<Major> need_a,
                     std::optional<Major> need_b, bool padded_k_on) {
  const bool grouped_along_k = geo.grouped == GroupedDim::kReduction;
  if (grouped_along_k &&
      padded_k_extent(geo.extent, geo.num_groups, chosen_k_group_pad(geo)) >
          std::numeric_limits<int32_t>::max()) {
    return false;
  }
  if (requested_backend() == Backend::kSm90) {
    return true;
  }
  if (!sm80_tile_count_fits_int32(geo)) {
    return !grouped_along_k || padded_k_on;  // else the generic kernel
  }
  if (grouped_along_k) {
    // Both operands are copied; the SM80 kernels read them as they are.
    return padded_k_on &&
        hopper_tf32_family({true, geo.m, geo.extent, geo.n, geo.num_groups,
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

// TF32 calls grouped along rows whose B is N-major (row-major weights) may
// run the swapped kernel that reads B as it is (GroupedMMSm90Tf32MnB.cuh)
// instead of a transposing copy of B or the SM80 kernels.
// OVERLAP_OPS_SM90_TF32_MN_B = auto (default) | copy (never: the route of
// hopper_tf32_family) | direct (always, where TMA can read B) for A/B runs.
enum class MnBMode { kAuto, kCopy, kDirect };

MnBMode tf32_mn_b_mode() {
  return static_cast<MnBMode>(
      env_choice("OVERLAP_OPS_SM90_TF32_MN_B", {"copy", "direct"}));
}

// auto: where it won on the H200 (tf32_mn_b_direct_wins,
// GroupedMMTf32Route.h).
bool tf32_mn_b_direct_chosen(MnBMode mode, const Geometry& geo) {
  switch (mode) {
    case MnBMode::kCopy:
      return false;
    case MnBMode::kDirect:
      return true;
    default:
      return tf32_mn_b_direct_wins(geo.extent, geo.num_groups,
                                   major_of(geo.a) == Major::kRow);
  }
}

// OVERLAP_OPS_SM90_TILE=small|medium|large|large_solo|wide
// pins the tile config for tuning runs (tools/gpu_session.sh benchtiles)
// where it applies (forced_tile_config); unset or auto uses the heuristic.
std::optional<sm90::TileConfig> requested_tile_config() {
  const size_t choice =
      env_choice("OVERLAP_OPS_SM90_TILE", sm90::kTileConfigNames);
  if (choice == 0) {
    return std::nullopt;
  }
  return static_cast<sm90::TileConfig>(choice - 1);
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

// The heuristic of GroupedMMTileChoice.h, or the pinned config.
sm90::TileChoice pick_tile_choice(const Geometry& geo, ScalarType in) {
  const sm90::TileQuery query{geo.grouped == GroupedDim::kRows,
                              host_group_m(geo), in == kFloat};
  return {sm90::tile_config_for(query, requested_tile_config())};
}

// What the store-tile and tile-order rules know of a call on `config`.
sm90::StoreTileQuery store_tile_query(const LaunchArgs& args,
                                      sm90::TileConfig config) {
  const ScalarType in = args.a.scalar_type();
  return {config, in != kFloat && args.out.scalar_type() == in,
          args.geo.grouped == GroupedDim::kReduction,
          args.geo.grouped == GroupedDim::kRows, mean_group_extent(args.geo)};
}

// The 128x256 configs' epilogue subtile width (store_tile_cols_for), or
// the one pinned by OVERLAP_OPS_SM90_STORE_TILE=cutlass|64|128 for A/B
// runs. A pinned 64 or 128 raises on a call whose unit does not build it
// (run_store_tile), rather than running another kernel.
int pick_store_tile_cols(const LaunchArgs& args, sm90::TileConfig config) {
  switch (env_choice("OVERLAP_OPS_SM90_STORE_TILE", {"cutlass", "64", "128"})) {
    case 1:
      return 0;
    case 2:
      return 64;
    case 3:
      return 128;
    default:
      break;
  }
  return sm90::store_tile_cols_for(store_tile_query(args, config));
}

// The chunked tile order's chunk (tile_chunk_for; 1: CUTLASS's order), or
// the one pinned by OVERLAP_OPS_SM90_TILE_CHUNK=off|2|4|8|16 for A/B runs.
// The chunked kernels are built for one kind of call only, so a pinned
// chunk raises on the others rather than timing a different kernel.
int pick_tile_chunk(const LaunchArgs& args, const sm90::TileChoice& choice) {
  const size_t pinned = env_choice("OVERLAP_OPS_SM90_TILE_CHUNK",
                                   {"off", "2", "4", "8", "16"});
  if (pinned == 0) {
    return sm90::tile_chunk_for(store_tile_query(args, choice.config),
                                choice.store_tile_cols, args.geo.m,
                                args.geo.n);
  }
  if (pinned == 1) {
    return 1;
  }
  TORCH_CHECK(
      choice.config == sm90::TileConfig::kLarge &&
          choice.store_tile_cols != 0,
      "grouped_mm: OVERLAP_OPS_SM90_TILE_CHUNK is built only for bf16 -> "
      "bf16 and fp16 -> fp16 calls grouped along K (wgrad) on the large "
      "config; this call runs ",
      sm90::tile_config_name(choice.config),
      choice.store_tile_cols == 0 ? " without a wider store tile" : "");
  return 1 << (pinned - 1);
}

// "(config NAME, N-column store tiles)": what an experiment switch that
// refuses a call reports of the kernel the call would run.
std::string kernel_in_message(const sm90::TileChoice& choice) {
  const std::string cols = choice.store_tile_cols == 0
      ? std::string("CUTLASS's")
      : std::to_string(choice.store_tile_cols);
  return " (config " + std::string(sm90::tile_config_name(choice.config)) +
      ", " + cols + "-column store tiles)";
}

// What OVERLAP_OPS_SM90_LAUNCH_WAVES runs on; the start of its refusal.
constexpr const char* kLaunchWavesBuiltFor =
    "grouped_mm: OVERLAP_OPS_SM90_LAUNCH_WAVES is built only for bf16 -> "
    "bf16 and fp16 -> fp16 calls on large_solo with 64-column store tiles "
    "(fwd, dgrad) or on large with wider store tiles (wgrad), and for TF32 "
    "calls grouped along rows on the direct read's 256-token tiles or on "
    "large_solo with the short K tile, without a swizzle or the dynamic "
    "walk";

// OVERLAP_OPS_SM90_SCHEDULER=static|dynamic (TileChoice::dynamic_tiles),
// an experiment: static unless set. Its kernel is built for one kind of
// call only, so the switch raises on the others rather than timing a
// different kernel.
bool pick_dynamic_tiles(const LaunchArgs& args,
                        const sm90::TileChoice& choice) {
  if (env_choice("OVERLAP_OPS_SM90_SCHEDULER", {"static", "dynamic"}) != 2) {
    return false;
  }
  const ScalarType in = args.a.scalar_type();
  const char* reason = nullptr;
  if (in == kFloat || args.out.scalar_type() != in) {
    reason = "float32 inputs or output";
  } else if (args.geo.grouped != GroupedDim::kRows) {
    reason = "a call not grouped along rows";
  } else if (choice.config != sm90::TileConfig::kLargeSolo) {
    reason = "another tile config";
  } else if (choice.store_tile_cols != 64) {
    reason = "store tiles other than 64 columns";
  } else if (choice.tile_chunk != 1) {
    reason = "a chunked tile order";
  }
  TORCH_CHECK(
      reason == nullptr,
      "grouped_mm: OVERLAP_OPS_SM90_SCHEDULER=dynamic is built only for "
      "bf16 -> bf16 and fp16 -> fp16 calls grouped along rows (fwd, dgrad) "
      "on the large_solo config with 64-column store tiles; this call has ",
      reason, kernel_in_message(choice));
  return true;
}

// OVERLAP_OPS_SM90_LAUNCH_WAVES=off|2|4|8|16 (TileChoice::launch_waves):
// off for 16-bit calls unless set (an experiment there); TF32 calls take
// the default of tf32_launch_waves_for once their route is known
// (tf32_launch_waves). The windowed kernels are built for a few kinds of
// call only, so a pinned value raises on the others rather than timing a
// different kernel. Returns the pinned waves, 0 for off, or nullopt when
// unset (auto).
std::optional<int> pinned_launch_waves(const sm90::TileChoice& choice,
                                       bool tf32) {
  const size_t pinned = env_choice("OVERLAP_OPS_SM90_LAUNCH_WAVES",
                                   {"off", "2", "4", "8", "16"});
  if (pinned == 0) {
    return std::nullopt;
  }
  if (pinned == 1) {
    return 0;
  }
  const char* reason = nullptr;
  if (choice.dynamic_tiles) {
    reason = "the dynamic walk (OVERLAP_OPS_SM90_SCHEDULER=dynamic)";
  } else if (choice.log_swizzle != 0) {
    reason = "a swizzle (OVERLAP_OPS_SM90_SWIZZLE)";
  } else if (!tf32 &&
             !((choice.config == sm90::TileConfig::kLargeSolo &&
                choice.store_tile_cols == 64) ||
               (choice.config == sm90::TileConfig::kLarge &&
                choice.store_tile_cols != 0))) {
    reason = "no kernel built for it";
  }
  TORCH_CHECK(reason == nullptr, kLaunchWavesBuiltFor, "; this call has ",
              reason, kernel_in_message(choice));
  return 1 << (pinned - 1);
}

// The direct read of N-major TF32 weights: 128-token tiles for small
// groups (tf32_mn_b_narrow_wins), past 96 rows per group on average split
// per group between the 128- and 256-token kernels (a token split,
// tf32_mn_b_token_split_wins), 256-token tiles on 2-CTA clusters from
// 1024 to 2047 rows per group on cards with the H200's DRAM bandwidth
// (sm90::tf32_mn_b_cluster_wins), else 256-token tiles without
// clusters. A pinned OVERLAP_OPS_SM90_TILE picks the token tile where it
// names one: medium 128, large_solo 256, large 256 on clusters; small
// and wide leave it to the rules. pins.windows:
// OVERLAP_OPS_SM90_LAUNCH_WAVES asks for windows, which are built without
// clusters, so the rules' clusters give way to the plain 256-token tile.
enum class MnBTile { kNarrow, kSplit, kWide, kCluster };

// OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT=on|off pins the token split for A/B
// runs: on splits every direct-read call, whatever its mean group size,
// and raises on a TF32 call that takes another route; off never splits.
// nullopt when unset or auto. Read for every TF32 call that reaches the
// Hopper dispatcher, so a bad value raises on any of them.
std::optional<bool> pinned_token_split() {
  switch (env_choice("OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT", {"on", "off"})) {
    case 1:
      return true;
    case 2:
      return false;
    default:
      return std::nullopt;
  }
}

// The current device's peak DRAM bandwidth in bytes per second (memory
// clock x bus width, two transfers a clock), read once per device: the
// cluster rule needs it (sm90::tf32_mn_b_cluster_wins).
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

// The switches pinned for the call that bear on the direct read's tile.
struct MnBTilePins {
  bool windows;  // OVERLAP_OPS_SM90_LAUNCH_WAVES asks for windows
  std::optional<bool> split;  // pinned_token_split
};

MnBTile tf32_mn_b_tile(const Geometry& geo, const MnBTilePins& pins) {
  std::optional<sm90::TileConfig> pinned = requested_tile_config();
  if (pinned == sm90::TileConfig::kSmall ||
      pinned == sm90::TileConfig::kWide) {
    pinned.reset();
  }
  // A split runs two token tiles, so it cannot honour a pinned one.
  TORCH_CHECK(!(pinned && pins.split.value_or(false)),
              "grouped_mm: OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT=on runs the "
              "128- and 256-token kernels; it cannot be combined with "
              "OVERLAP_OPS_SM90_TILE=", sm90::tile_config_name(*pinned),
              ", which pins one of them");
  if (!pinned &&
      pins.split.value_or(
          tf32_mn_b_token_split_wins(geo.extent, geo.num_groups))) {
    return MnBTile::kSplit;
  }
  if (pinned ? *pinned == sm90::TileConfig::kMedium
             : tf32_mn_b_narrow_wins(geo.extent, geo.num_groups)) {
    return MnBTile::kNarrow;
  }
  const bool cluster = pinned
      ? *pinned == sm90::TileConfig::kLarge
      : !pins.windows &&
          sm90::tf32_mn_b_cluster_wins(geo.extent, geo.num_groups,
                                       peak_dram_bytes_per_second());
  return cluster ? MnBTile::kCluster : MnBTile::kWide;
}

// TF32 windowed launches: built on the direct read's 256-token tiles and
// on the K-major large_solo kernel with the short K tile. pinned: the
// switch's value (pinned_launch_waves); mn_b_tile: the direct read's tile,
// or nullopt for the K-major kernels; reaches_sm90: false where the SM80
// or generic kernels take the call. Unset, the default where the kernels
// are built (tf32_launch_waves_for); pinned, its waves, or an error where
// they are not.
int tf32_launch_waves(const LaunchArgs& args,
                      const sm90::TileChoice& choice,
                      std::optional<int> pinned,
                      std::optional<MnBTile> mn_b_tile, bool reaches_sm90) {
  // A token split runs the 128-token kernel too, where no windows are
  // built.
  const sm90::Tf32WindowQuery query{
      mn_b_tile.has_value(),
      mn_b_tile == MnBTile::kNarrow || mn_b_tile == MnBTile::kSplit,
      mn_b_tile == MnBTile::kCluster, choice.config, choice.tf32_short_k,
      host_group_m(args.geo)};
  if (!pinned) {
    // A pinned swizzle (an experiment) keeps its one launch: the windows
    // walk CUTLASS's order.
    return reaches_sm90 && choice.log_swizzle == 0
        ? sm90::tf32_launch_waves_for(query)
        : 0;
  }
  if (*pinned == 0) {
    return 0;
  }
  const char* reason = nullptr;
  if (!reaches_sm90) {
    reason = "the SM80 or generic kernels";
  } else if (!sm90::tf32_windows_built(query)) {
    if (mn_b_tile) {
      switch (*mn_b_tile) {
        case MnBTile::kNarrow:
          reason = "the direct read's 128-token tiles";
          break;
        case MnBTile::kSplit:
          reason = "the direct read's token split (128-token tiles, "
                   "then 256-token tiles)";
          break;
        default:
          reason = "the direct read's 2-CTA clusters";
      }
    } else {
      reason = choice.config != sm90::TileConfig::kLargeSolo
          ? "another tile config"
          : "the long K tile (OVERLAP_OPS_SM90_TF32_K_TILE=long)";
    }
  }
  TORCH_CHECK(reason == nullptr, kLaunchWavesBuiltFor, "; this TF32 call "
              "runs ", reason, " (config ",
              sm90::tile_config_name(choice.config), ")");
  return *pinned;
}

// OVERLAP_OPS_SM90_RASTER=m|n, read with the other switches before any
// launch; nullopt when unset or auto.
std::optional<sm90::RasterOrder> requested_raster_order() {
  switch (env_choice("OVERLAP_OPS_SM90_RASTER", {"m", "n"})) {
    case 1:
      return sm90::RasterOrder::kAlongM;
    case 2:
      return sm90::RasterOrder::kAlongN;
    default:
      return std::nullopt;
  }
}

// The rule of raster_order_for over a group's output extents as the host
// knows them, or OVERLAP_OPS_SM90_RASTER=m|n pinned for A/B runs. The
// swapped TF32 kernel has its own rule (swapped_raster_order_for: tokens
// first on its 128-token tiles, weights first on the others).
// `pinned`: OVERLAP_OPS_SM90_RASTER's value (requested_raster_order).
sm90::RasterOrder pick_raster_order(
    const Geometry& geo, std::optional<MnBTile> swapped,
    std::optional<sm90::RasterOrder> pinned) {
  if (pinned) {
    return *pinned;
  }
  if (swapped) {
    return sm90::swapped_raster_order_for(*swapped == MnBTile::kNarrow);
  }
  return sm90::raster_order_for(host_group_m(geo), geo.n);
}

// A token split: the groups that fit one 128-token tile, then the larger
// ones on the 256-token kernel (each launch's fill writes the other
// side's groups as empty problems). Both kernels take the same operands,
// so the second is not expected to refuse once the first has launched.
const char* run_tf32_mn_b_split(const LaunchArgs& args,
                                const sm90::LeadingDims& ld,
                                sm90::TileChoice choice,
                                std::optional<sm90::RasterOrder> raster) {
  choice.split_rows = kMnBNarrowTokens;
  choice.split_past = false;
  choice.raster = pick_raster_order(args.geo, MnBTile::kNarrow, raster);
  if (const char* error = sm90::run_sm90_tf32_mn_b_narrow(args, ld, choice)) {
    return error;
  }
  choice.split_past = true;
  choice.raster = pick_raster_order(args.geo, MnBTile::kWide, raster);
  return sm90::run_sm90_tf32_mn_b(args, ld, choice);
}

// raster: OVERLAP_OPS_SM90_RASTER's value (requested_raster_order).
const char* run_tf32_mn_b(const LaunchArgs& args, const sm90::LeadingDims& ld,
                          sm90::TileChoice choice, MnBTile tile,
                          std::optional<sm90::RasterOrder> raster) {
  if (tile == MnBTile::kSplit) {
    return run_tf32_mn_b_split(args, ld, choice, raster);
  }
  choice.raster = pick_raster_order(args.geo, tile, raster);
  switch (tile) {
    case MnBTile::kNarrow:
      return sm90::run_sm90_tf32_mn_b_narrow(args, ld, choice);
    case MnBTile::kCluster:
      return sm90::run_sm90_tf32_mn_b_cluster(args, ld, choice);
    default:
      return sm90::run_sm90_tf32_mn_b(args, ld, choice);
  }
}

template <typename In, typename Out>
const char* run_for_majors(const LaunchArgs& args, const sm90::LeadingDims& ld,
                           Major a, Major b, sm90::TileChoice config) {
  if constexpr (std::is_same_v<In, float>) {
    return sm90::run_sm90<float, float, true, false>(args, ld, config);
  } else {
    if (a == Major::kRow && b == Major::kRow) {
      return sm90::run_sm90<In, Out, true, true>(args, ld, config);
    }
    if (a == Major::kRow) {
      return sm90::run_sm90<In, Out, true, false>(args, ld, config);
    }
    return sm90::run_sm90<In, Out, false, true>(args, ld, config);
  }
}

const char* run_for_dtypes(const LaunchArgs& args, const sm90::LeadingDims& ld,
                           Major a, Major b, sm90::TileChoice config) {
  const bool out_fp32 = args.out.scalar_type() == kFloat;
  switch (args.a.scalar_type()) {
    case kBFloat16:
      return out_fp32
          ? run_for_majors<c10::BFloat16, float>(args, ld, a, b, config)
          : run_for_majors<c10::BFloat16, c10::BFloat16>(args, ld, a, b,
                                                          config);
    case kHalf:
      return out_fp32
          ? run_for_majors<c10::Half, float>(args, ld, a, b, config)
          : run_for_majors<c10::Half, c10::Half>(args, ld, a, b, config);
    default:
      return run_for_majors<float, float>(args, ld, a, b, config);
  }
}

}  // namespace

bool sm90_available_for(ScalarType input_dtype) {
  const Backend requested = requested_backend();
  if (requested != Backend::kAuto && requested != Backend::kSm90) {
    return false;
  }
  if (at::cuda::getCurrentDeviceProperties()->major != 9) {
    return false;
  }
  return input_dtype != kFloat || at::globalContext().allowTF32CuBLAS();
}

bool try_launch_sm90_grouped_mm(LaunchArgs& args) {
  const ScalarType in = args.a.scalar_type();
  if (!sm90_available_for(in) || args.geo.grouped == GroupedDim::kCols ||
      !fits_int32(args.geo)) {
    return false;
  }
  // The environment switches first: a bad value raises before any launch.
  sm90::TileChoice choice = pick_tile_choice(args.geo, in);
  switch (env_choice("OVERLAP_OPS_SM90_HOST_PATH",
                     {"direct", "lean", "classic"})) {
    case 2:
      choice.host_path = sm90::HostPath::kLean;
      break;
    case 3:
      choice.host_path = sm90::HostPath::kClassic;
      break;
    default:
      break;
  }
  if (env_choice("OVERLAP_OPS_SM90_BIAS", {"epilogue", "kernel"}) == 2) {
    choice.bias_in_epilogue = false;
  }
  // OVERLAP_OPS_SM90_SWIZZLE=1|2|4|8: the tile-order swizzle experiment
  // (sm90::TileChoice::log_swizzle); unset or auto: none.
  const size_t swizzle =
      env_choice("OVERLAP_OPS_SM90_SWIZZLE", {"1", "2", "4", "8"});
  choice.log_swizzle = swizzle == 0 ? 0 : static_cast<int>(swizzle) - 1;
  choice.store_tile_cols = pick_store_tile_cols(args, choice.config);
  choice.tile_chunk = pick_tile_chunk(args, choice);
  choice.dynamic_tiles = pick_dynamic_tiles(args, choice);
  const std::optional<int> launch_waves_pinned =
      pinned_launch_waves(choice, in == kFloat);
  choice.launch_waves = launch_waves_pinned.value_or(0);
  const std::optional<sm90::RasterOrder> pinned_raster =
      requested_raster_order();
  if (env_choice("OVERLAP_OPS_SM90_TF32_K_TILE", {"short", "long"}) == 2) {
    choice.tf32_short_k = false;
  }
  const bool padded_k_on = padded_k_allowed();
  const bool tf32 = in == kFloat;
  // The switch is read (and a bad value raises) for every TF32 call. B
  // must also be aligned for TMA as it is; otherwise the copy route (which
  // makes an aligned K-major copy) or the SM80 kernels take the call.
  const MnBMode mn_b_mode = tf32 ? tf32_mn_b_mode() : MnBMode::kCopy;
  const std::optional<bool> split_pinned =
      tf32 ? pinned_token_split() : std::nullopt;
  const bool mn_b_direct = tf32 &&
      tf32_mn_b_direct_chosen(mn_b_mode, args.geo) &&
      args.geo.grouped == GroupedDim::kRows &&
      major_of(args.geo.b) == Major::kRow &&
      aligned(args.b, args.geo.b, Major::kRow,
              kTmaAlignBytes / static_cast<int64_t>(sizeof(float)));
  // A pinned split on a call it cannot split raises rather than timing
  // another kernel.
  TORCH_CHECK(mn_b_direct || !split_pinned.value_or(false),
              "grouped_mm: OVERLAP_OPS_SM90_TF32_TOKEN_SPLIT=on is built "
              "only for the direct read of row-major TF32 weights (rows "
              "grouped, weights TMA can read as they are, "
              "OVERLAP_OPS_SM90_TF32_MN_B not copy); this call takes "
              "another route");
  const std::optional<MnBTile> mn_b_tile = mn_b_direct
      ? std::optional(tf32_mn_b_tile(
            args.geo, {launch_waves_pinned.value_or(0) > 0, split_pinned}))
      : std::nullopt;
  const std::optional<Major> need_a = sm90_a_major(args.geo.grouped, tf32);
  const std::optional<Major> need_b = mn_b_direct
      ? std::optional(Major::kRow)
      : sm90_b_major(args.geo.grouped, tf32);
  // Where the call leaves for the SM80 or generic kernels, a TF32
  // experiment switch that only the SM90 kernels take raises first.
  const auto leave_sm90 = [&] {
    if (tf32) {
      tf32_launch_waves(args, choice, launch_waves_pinned, std::nullopt,
                        false);
    }
    return false;
  };
  if (tf32 && !mn_b_direct &&
      !sm90_takes_tf32(args.geo, need_a, need_b, padded_k_on)) {
    return leave_sm90();  // the SM80 kernels take it
  }
  const bool padded_k = tf32 && args.geo.grouped == GroupedDim::kReduction;
  if (padded_k && !output_aligned(args, kTmaAlignBytes)) {
    return leave_sm90();  // before the copies: the output decides alone here
  }
  const SettledOperands ops = padded_k
      ? settle_k_padded_operands(args, chosen_k_group_pad(args.geo))
      : settle_operands(args, need_a, need_b);
  if (!operands_aligned(args, ops, kTmaAlignBytes)) {
    return leave_sm90();
  }
  if (tf32) {
    choice.launch_waves =
        tf32_launch_waves(args, choice, launch_waves_pinned, mn_b_tile, true);
  }
  use_settled_operands(args, ops);
  const sm90::LeadingDims ld{leading_dim(ops.sa, ops.a_major),
                             leading_dim(ops.sb, ops.b_major),
                             args.geo.d.row};
  const char* error = nullptr;
  if (mn_b_tile) {
    error = run_tf32_mn_b(args, ld, choice, *mn_b_tile, pinned_raster);
  } else {
    choice.raster = pick_raster_order(args.geo, std::nullopt, pinned_raster);
    error = run_for_dtypes(args, ld, ops.a_major, ops.b_major, choice);
  }
  TORCH_CHECK(error == nullptr, "grouped_mm: SM90 kernel: ", error);
  // Otherwise nothing to finish: the epilogue added the bias, the fill
  // wrote the k = 0 groups and the tail.
  if (!choice.bias_in_epilogue) {
    launch_finish_groups(args);
  }
  return true;
}

}  // namespace at::native::grouped_mm
