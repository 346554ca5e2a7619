// Chooses and launches a Hopper grouped GEMM from host metadata only:
// dtype, operand majors and alignment, and host-known sizes. Operands whose
// layout the TMA kernels cannot read are re-laid out once (a copy, no sync).

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMSm90.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace at::native::grouped_mm {
namespace {

enum class Major { kRow, kCol };

constexpr int64_t kTmaAlignBytes = 16;
// Tile config by mean rows per group, the only size the host knows without a
// sync (results/NOTES.md, v4). Up to 32: 64-row tiles (decode). Up to 128:
// 128-row pingpong tiles without a cluster, so groups somewhat larger than
// the mean still stream their weights once. Beyond: 128x256 tiles with
// 2-CTA clusters (medium tiles lost up to 16% there on skewed/sparse rows).
constexpr int64_t kSmallTileMaxRows = 32;
constexpr int64_t kMediumTileMaxRows = 128;

// A (m x k) is row-major when k is contiguous; B (k x n) when n is.
std::optional<Major> major_of(const OperandStrides& s) {
  if (s.col == 1) {
    return Major::kRow;
  }
  if (s.row == 1) {
    return Major::kCol;
  }
  return std::nullopt;
}

Tensor relayout(const Tensor& t, Major want) {
  if (want == Major::kRow) {
    return t.contiguous();
  }
  return t.transpose(-2, -1).contiguous().transpose(-2, -1);
}

// Offsets move along the grouped dimension; TMA needs every group's base
// address 16-byte aligned, so that dimension must not be the contiguous one.
std::optional<Major> required_a_major(GroupedDim grouped, bool tf32) {
  if (tf32) {  // TF32 WGMMA reads K-major operands only
    return grouped == GroupedDim::kReduction ? std::nullopt
                                              : std::optional(Major::kRow);
  }
  switch (grouped) {
    case GroupedDim::kRows:
      return Major::kRow;
    case GroupedDim::kReduction:
      return Major::kCol;
    default:
      return std::nullopt;  // either
  }
}

std::optional<Major> required_b_major(GroupedDim grouped, bool tf32) {
  if (tf32) {
    return Major::kCol;
  }
  return grouped == GroupedDim::kReduction ? std::optional(Major::kRow)
                                           : std::nullopt;
}

// Picks the operand's major (re-laying it out if needed) and returns it.
Major settle_operand(Tensor& t, OperandStrides& s,
                     std::optional<Major> required) {
  const std::optional<Major> current = major_of(s);
  Major want = required.value_or(current.value_or(Major::kRow));
  if (current != want) {
    t = relayout(t, want);
    s = operand_strides(t);
  }
  return want;
}

bool aligned(const Tensor& t, const OperandStrides& s, Major major,
             int64_t align_elems) {
  const int64_t ld = major == Major::kRow ? s.row : s.col;
  const auto address = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  return address % kTmaAlignBytes == 0 && ld % align_elems == 0 &&
      s.group % align_elems == 0;
}

bool fits_int32(const Geometry& geo) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return geo.m <= kMax && geo.n <= kMax && geo.k <= kMax &&
      geo.extent <= kMax && geo.num_groups <= kMax;
}

// Reads a tuning/testing switch: 0 when `name` is unset, empty or "auto",
// else 1 + the index of its value in `choices`. Any other value raises an
// error that lists the accepted ones.
size_t env_choice(const char* name,
                  std::initializer_list<std::string_view> choices) {
  const char* env = std::getenv(name);
  const std::string_view value = env == nullptr ? "" : env;
  if (value.empty() || value == "auto") {
    return 0;
  }
  size_t index = 1;
  std::string accepted = "auto";
  for (std::string_view choice : choices) {
    if (value == choice) {
      return index;
    }
    ++index;
    accepted.append(", ").append(choice);
  }
  TORCH_CHECK(false, name, " must be one of ", accepted, "; got '", value,
              "'");
}

// OVERLAP_OPS_SM90_TILE=large|medium|small pins the tile config for tuning runs
// (tools/gpu_session.sh benchtiles); unset or auto uses the heuristic.
std::optional<sm90::TileConfig> forced_tile_config() {
  switch (env_choice("OVERLAP_OPS_SM90_TILE", {"small", "medium", "large"})) {
    case 1:
      return sm90::TileConfig::kSmall;
    case 2:
      return sm90::TileConfig::kMedium;
    case 3:
      return sm90::TileConfig::kLarge;
    default:
      return std::nullopt;
  }
}

sm90::TileConfig pick_tile_config(const Geometry& geo) {
  if (const auto forced = forced_tile_config()) {
    return *forced;
  }
  const int64_t rows_per_group = geo.grouped == GroupedDim::kRows
      ? geo.extent / std::max<int64_t>(1, geo.num_groups)
      : geo.m;
  if (rows_per_group <= kSmallTileMaxRows) {
    return sm90::TileConfig::kSmall;
  }
  return rows_per_group <= kMediumTileMaxRows ? sm90::TileConfig::kMedium
                                              : sm90::TileConfig::kLarge;
}

template <typename In, typename Out>
const char* run_for_majors(const LaunchArgs& args, const sm90::LeadingDims& ld,
                           Major a, Major b, sm90::TileConfig config) {
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
                           Major a, Major b, sm90::TileConfig config) {
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

Backend requested_backend() {
  switch (env_choice("OVERLAP_OPS_GROUPED_MM_BACKEND", {"sm90", "generic"})) {
    case 1:
      return Backend::kSm90;
    case 2:
      return Backend::kGeneric;
    default:
      return Backend::kAuto;
  }
}

bool sm90_available_for(ScalarType input_dtype) {
  if (requested_backend() == Backend::kGeneric) {
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
  const bool tf32 = in == kFloat;
  const std::optional<Major> need_a = required_a_major(args.geo.grouped, tf32);
  const std::optional<Major> need_b = required_b_major(args.geo.grouped, tf32);
  if (tf32 && args.geo.grouped == GroupedDim::kReduction) {
    return false;  // K-major operands would be grouped along K: unaligned
  }
  Tensor a = args.a;
  Tensor b = args.b;
  OperandStrides sa = args.geo.a;
  OperandStrides sb = args.geo.b;
  Major a_major = settle_operand(a, sa, need_a);
  Major b_major = settle_operand(b, sb, need_b);
  if (a_major == Major::kCol && b_major == Major::kCol) {
    // Not instantiated: make A row-major instead.
    a_major = settle_operand(a, sa, Major::kRow);
  }
  const int64_t align_in = kTmaAlignBytes / elementSize(in);
  const int64_t align_out = kTmaAlignBytes / elementSize(args.out.scalar_type());
  const OperandStrides& sd = args.geo.d;
  if (!aligned(a, sa, a_major, align_in) || !aligned(b, sb, b_major, align_in) ||
      sd.col != 1 || !aligned(args.out, sd, Major::kRow, align_out)) {
    return false;
  }
  args.a = a;
  args.b = b;
  args.geo.a = sa;
  args.geo.b = sb;
  const sm90::LeadingDims ld{
      a_major == Major::kRow ? sa.row : sa.col,
      b_major == Major::kRow ? sb.row : sb.col, sd.row};
  const char* error = run_for_dtypes(
      args, ld, a_major, b_major, pick_tile_config(args.geo));
  TORCH_CHECK(error == nullptr, "grouped_mm: SM90 kernel: ", error);
  launch_finish_groups(args);
  return true;
}

}  // namespace at::native::grouped_mm
