// Host code only: operand layout rules of the tensor-core grouped-mm paths.

// CUDA only: ROCm keeps upstream's _grouped_mm (GroupedBlas.cpp calls the
// device-offset path under !USE_ROCM), so the ROCm build's hipified copy of
// this file is empty.
#if !defined(USE_ROCM)

#include <ATen/native/cuda/GroupedMMOperandLayout.h>

#include <ATen/Functions.h>

#include <cstdint>
#include <limits>

namespace at::native::grouped_mm {

std::optional<Major> major_of(const OperandStrides& s) {
  if (s.col == 1) {
    return Major::kRow;
  }
  if (s.row == 1) {
    return Major::kCol;
  }
  return std::nullopt;
}

std::optional<Major> required_a_major(GroupedDim grouped) {
  switch (grouped) {
    case GroupedDim::kRows:
      return Major::kRow;
    case GroupedDim::kReduction:
      return Major::kCol;
    default:
      return std::nullopt;  // either
  }
}

std::optional<Major> required_b_major(GroupedDim grouped) {
  return grouped == GroupedDim::kReduction ? std::optional(Major::kRow)
                                           : std::nullopt;
}

namespace {

// A copy of t (2-D or batched 3-D) with the given major, made within the
// SM carveout like every other kernel of the call.
Tensor relayout(const Tensor& t, Major want, int64_t sm_limit) {
  Tensor out;
  if (want == Major::kRow) {
    out = at::empty(t.sizes(), t.options());
  } else {
    out = at::empty(t.transpose(-2, -1).sizes(), t.options())
              .transpose(-2, -1);
  }
  copy_within_sm_limit(t, out, sm_limit);
  return out;
}

}  // namespace

SettledMajors settled_majors(
    const OperandStrides& sa, const OperandStrides& sb,
    std::optional<Major> need_a, std::optional<Major> need_b) {
  SettledMajors majors{need_a.value_or(major_of(sa).value_or(Major::kRow)),
                       need_b.value_or(major_of(sb).value_or(Major::kRow))};
  if (majors.a == Major::kCol && majors.b == Major::kCol) {
    majors.a = Major::kRow;
  }
  return majors;
}

bool copied_to(const OperandStrides& s, Major major) {
  return major_of(s) != major;
}

Major settle_operand(
    Tensor& t, OperandStrides& s, std::optional<Major> required,
    int64_t sm_limit) {
  const std::optional<Major> current = major_of(s);
  const Major want = required.value_or(current.value_or(Major::kRow));
  if (current != want) {
    t = relayout(t, want, sm_limit);
    s = operand_strides(t);
  }
  return want;
}

int64_t leading_dim(const OperandStrides& s, Major major) {
  return major == Major::kRow ? s.row : s.col;
}

bool aligned(
    const Tensor& t, const OperandStrides& s, Major major,
    int64_t align_elems) {
  const auto address = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const auto align_bytes =
      static_cast<uintptr_t>(align_elems * t.element_size());
  return address % align_bytes == 0 &&
      leading_dim(s, major) % align_elems == 0 &&
      s.group % align_elems == 0;
}

SettledOperands settle_operands(
    const LaunchArgs& args, std::optional<Major> need_a,
    std::optional<Major> need_b) {
  SettledOperands ops{args.a, args.b, args.geo.a, args.geo.b, Major::kRow,
                      Major::kRow};
  const SettledMajors majors =
      settled_majors(ops.sa, ops.sb, need_a, need_b);
  ops.a_major = settle_operand(ops.a, ops.sa, majors.a, args.sm_limit);
  ops.b_major = settle_operand(ops.b, ops.sb, majors.b, args.sm_limit);
  return ops;
}

SettledOperands settle_k_padded_operands(
    const LaunchArgs& args, int64_t pad) {
  const Geometry& geo = args.geo;
  const int64_t width = padded_k_extent(geo.extent, geo.num_groups, pad);
  const Tensor a = at::empty({geo.m, width}, args.a.options());
  const Tensor b = at::empty({geo.n, width}, args.b.options()).t();
  copy_k_groups_padded(args.a, a, args.offs, geo.num_groups,
                       /*k_along_rows=*/false, pad, args.sm_limit);
  copy_k_groups_padded(args.b, b, args.offs, geo.num_groups,
                       /*k_along_rows=*/true, pad, args.sm_limit);
  return {a, b, operand_strides(a), operand_strides(b), Major::kRow,
          Major::kCol, pad};
}

bool output_aligned(const LaunchArgs& args, int64_t align_bytes) {
  return args.geo.d.col == 1 &&
      aligned(args.out, args.geo.d, Major::kRow,
              align_bytes / args.out.element_size());
}

bool operands_aligned(
    const LaunchArgs& args, const SettledOperands& ops, int64_t align_bytes) {
  const int64_t in = align_bytes / ops.a.element_size();
  return aligned(ops.a, ops.sa, ops.a_major, in) &&
      aligned(ops.b, ops.sb, ops.b_major, in) &&
      output_aligned(args, align_bytes);
}

void use_settled_operands(LaunchArgs& args, const SettledOperands& ops) {
  args.a = ops.a;
  args.b = ops.b;
  args.geo.a = ops.sa;
  args.geo.b = ops.sb;
  args.geo.k_group_pad = ops.k_group_pad;
}

bool fits_int32(const Geometry& geo) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return geo.m <= kMax && geo.n <= kMax && geo.k <= kMax &&
      geo.extent <= kMax && geo.num_groups <= kMax;
}

}  // namespace at::native::grouped_mm

#endif  // !defined(USE_ROCM)
