// Chooses and launches an SM80 grouped GEMM (CUTLASS 2.x, GroupedMMSm80.cuh)
// from host metadata only: dtype, operand majors, alignment and host-known
// sizes. The operand rules are the ones the Hopper path uses
// (GroupedMMOperandLayout.h); what differs is that CUTLASS 2.x loads whole
// vectors under one predicate, so the contiguous extent of every operand must
// be a multiple of the vector width as well. The widest width that every
// operand allows is used; operands that allow none go to the generic kernel.

// CUDA only: ROCm keeps upstream's _grouped_mm (GroupedBlas.cpp calls the
// device-offset path under !USE_ROCM), so the ROCm build's hipified copy of
// this file is empty.
#if !defined(USE_ROCM)

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/GroupedMMDispatchRule.h>
#include <ATen/native/cuda/GroupedMMKernels.h>
#include <ATen/native/cuda/GroupedMMOperandLayout.h>
#include <ATen/native/cuda/GroupedMMSm80.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>

namespace at::native::grouped_mm {
namespace {

using sm80::Access;

// Widest first.
constexpr std::array<Access, 2> kAccessWidths = {
    Access::k16Bytes, Access::k4Bytes};

// The settled majors never make the grouped dimension the contiguous one
// (required_a_major / required_b_major), so the contiguous extent of each
// operand is one of the host-known sizes.
int64_t contiguous_extent_a(const Geometry& geo, Major major) {
  return major == Major::kRow ? geo.k : geo.m;
}

int64_t contiguous_extent_b(const Geometry& geo, Major major) {
  return major == Major::kRow ? geo.n : geo.k;
}

bool allows(
    const LaunchArgs& args, const SettledOperands& ops, Access access) {
  const int64_t bytes = sm80::access_bytes(access);
  const int64_t in = bytes / ops.a.element_size();
  const int64_t out = bytes / args.out.element_size();
  const Geometry& geo = args.geo;
  return operands_aligned(args, ops, bytes) &&
      contiguous_extent_a(geo, ops.a_major) % in == 0 &&
      contiguous_extent_b(geo, ops.b_major) % in == 0 && geo.n % out == 0;
}

std::optional<Access> widest_access(
    const LaunchArgs& args, const SettledOperands& ops) {
  for (Access access : kAccessWidths) {
    if (allows(args, ops, access)) {
      return access;
    }
  }
  return std::nullopt;
}

}  // namespace

// CUTLASS's device-side scheduler numbers the tiles of all groups in int32.
// Bound the total from host-known sizes. Valid offsets would allow a tight
// bound (one partial row tile per group), but unchecked offsets are not
// validated and decreasing ones make clamped groups overlap (up to the full
// extent each), so the bound assumes every group may span all rows; only
// huge problems (e.g. 4096 groups x 1M rows x 16K columns) exceed it and
// take the generic kernel.
bool sm80_tile_count_fits_int32(const Geometry& geo) {
  const auto ceil_div = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
  const int64_t col_tiles = ceil_div(geo.n, sm80::kTileN);
  const int64_t rows_per_group =
      geo.grouped == GroupedDim::kRows ? geo.extent : geo.m;
  const int64_t group_row_tiles = ceil_div(rows_per_group, sm80::kTileM);
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (group_row_tiles != 0 && geo.num_groups > kMax / group_row_tiles) {
    return false;
  }
  const int64_t row_tiles = geo.num_groups * group_row_tiles;
  return col_tiles == 0 || row_tiles <= kMax / col_tiles;
}

namespace {

template <typename In, typename Out>
const char* run_for_majors(const LaunchArgs& args, const sm80::LeadingDims& ld,
                           Major a, Major b, Access access) {
  if (a == Major::kRow && b == Major::kRow) {
    return sm80::run_sm80<In, Out, true, true>(args, ld, access);
  }
  if (a == Major::kRow) {
    return sm80::run_sm80<In, Out, true, false>(args, ld, access);
  }
  return sm80::run_sm80<In, Out, false, true>(args, ld, access);
}

const char* run_for_dtypes(const LaunchArgs& args, const sm80::LeadingDims& ld,
                           Major a, Major b, Access access) {
  const bool out_fp32 = args.out.scalar_type() == kFloat;
  switch (args.a.scalar_type()) {
    case kBFloat16:
      return out_fp32
          ? run_for_majors<c10::BFloat16, float>(args, ld, a, b, access)
          : run_for_majors<c10::BFloat16, c10::BFloat16>(args, ld, a, b,
                                                          access);
    case kHalf:
      return out_fp32
          ? run_for_majors<c10::Half, float>(args, ld, a, b, access)
          : run_for_majors<c10::Half, c10::Half>(args, ld, a, b, access);
    default:
      return run_for_majors<float, float>(args, ld, a, b, access);
  }
}

}  // namespace

bool sm80_available_for(ScalarType input_dtype) {
  const int major = at::cuda::getCurrentDeviceProperties()->major;
  switch (requested_backend()) {
    case Backend::kAuto:
      // SM90 has the Hopper kernels, but hands TF32 calls here when
      // transposing an operand for TF32 WGMMA would cost more than it saves,
      // and 2d x 2d, which TF32 WGMMA cannot group (GroupedMMTf32Route.h);
      // a binary without their sm_90a code hands every call here.
      // SM100 and later datacenter parts would run this path from the
      // compute_80 PTX as well, but it has not been decided (or measured)
      // that it beats the generic kernel there.
      if (!sm80_kernels_by_default(major, input_dtype == kFloat,
                                   hopper_kernels_built())) {
        return false;
      }
      break;
    case Backend::kSm80:
      // mma.sync with bf16 / TF32 needs SM80; later GPUs run the kernels
      // from the compute_80 PTX, Hopper included.
      if (major < 8) {
        return false;
      }
      break;
    default:
      return false;
  }
  return input_dtype != kFloat || at::globalContext().allowTF32CuBLAS();
}

bool try_launch_sm80_grouped_mm(LaunchArgs& args) {
  // Grouped columns would make D's contiguous extent device-only; the entry
  // rewrites 3d x 2d as a transposed 2d x 3d instead.
  if (!sm80_available_for(args.a.scalar_type()) ||
      args.geo.grouped == GroupedDim::kCols || !fits_int32(args.geo) ||
      !sm80_tile_count_fits_int32(args.geo)) {
    return false;
  }
  // The shared operand rules (GroupedMMOperandLayout.h) for every dtype:
  // TF32 mma.sync, unlike TF32 WGMMA, reads either major.
  const GroupedDim grouped = args.geo.grouped;
  const SettledOperands ops = settle_operands(
      args, required_a_major(grouped), required_b_major(grouped));
  const std::optional<Access> access = widest_access(args, ops);
  if (!access.has_value()) {
    return false;
  }
  use_settled_operands(args, ops);
  const sm80::LeadingDims ld{
      leading_dim(ops.sa, ops.a_major), leading_dim(ops.sb, ops.b_major),
      args.geo.d.row};
  const char* error =
      run_for_dtypes(args, ld, ops.a_major, ops.b_major, *access);
  TORCH_CHECK(error == nullptr, "grouped_mm: SM80 kernel: ", error);
  launch_finish_groups(args);
  return true;
}

}  // namespace at::native::grouped_mm

#endif  // !defined(USE_ROCM)
