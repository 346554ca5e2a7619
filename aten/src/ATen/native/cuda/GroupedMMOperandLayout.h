#pragma once

// Host-side operand layout rules shared by the tensor-core paths (SM80 and
// SM90): which major each operand needs so that moving along the grouped
// dimension keeps every group's base aligned, re-laying out operands that
// do not have it, and the alignment checks. Decided from strides and
// pointers only, never from the offsets' values.

#include <ATen/core/Tensor.h>
#include <ATen/native/cuda/GroupedMMKernels.h>

#include <optional>

namespace at::native::grouped_mm {

enum class Major { kRow, kCol };

// A (m x k) is row-major when k is contiguous; B (k x n) when n is.
std::optional<Major> major_of(const OperandStrides& s);

// Offsets move along the grouped dimension. If that dimension were the
// contiguous one, group bases would be at arbitrary element offsets, so the
// grouped dimension must be the strided one: A row-major when rows are
// grouped, A column-major and B row-major when K is grouped.
std::optional<Major> required_a_major(GroupedDim grouped);
std::optional<Major> required_b_major(GroupedDim grouped);

// The majors settle_operands gives A and B for these needs: the needed one,
// else the operand's own, else row-major; A row-major when both would be
// column-major (neither path instantiates that).
struct SettledMajors {
  Major a;
  Major b;
};
SettledMajors settled_majors(
    const OperandStrides& sa, const OperandStrides& sb,
    std::optional<Major> need_a, std::optional<Major> need_b);

// Whether giving an operand with strides s that major takes a copy.
bool copied_to(const OperandStrides& s, Major major);

// Gives t the required major (or keeps its own, row-major if it has
// neither) by a copy within sm_limit CTAs when needed; updates s and returns
// the major.
Major settle_operand(
    Tensor& t, OperandStrides& s, std::optional<Major> required,
    int64_t sm_limit);

// The leading dimension of an operand with the given major.
int64_t leading_dim(const OperandStrides& s, Major major);

// Base address aligned to align_elems elements, and leading dim and group
// stride multiples of it, so every group's base is aligned as well.
bool aligned(
    const Tensor& t, const OperandStrides& s, Major major,
    int64_t align_elems);

// A and B as a tensor-core path reads them: possibly re-laid-out copies of
// args.a / args.b, their strides and their majors.
struct SettledOperands {
  Tensor a;
  Tensor b;
  OperandStrides sa;
  OperandStrides sb;
  Major a_major;
  Major b_major;
  int64_t k_group_pad = 0;  // Geometry::k_group_pad of a and b
};

// settle_operand for A and B, to settled_majors.
SettledOperands settle_operands(
    const LaunchArgs& args, std::optional<Major> need_a,
    std::optional<Major> need_b);

// A call grouped along K (2d x 2d) for a path that reads K-major operands
// only (TF32 WGMMA): A row-major and B column-major copies in which each
// group's K range starts at a multiple of pad elements (padded_k_start), so
// that every group's base is aligned whatever the offsets are.
SettledOperands settle_k_padded_operands(const LaunchArgs& args, int64_t pad);

// D row-major and aligned to align_bytes in the sense of aligned().
bool output_aligned(const LaunchArgs& args, int64_t align_bytes);

// A, B and D (which must be row-major) all aligned to align_bytes, in the
// sense of aligned(): the vector width every group's loads and stores use.
bool operands_aligned(
    const LaunchArgs& args, const SettledOperands& ops, int64_t align_bytes);

// Makes args use the settled operands (once the path has accepted them).
void use_settled_operands(LaunchArgs& args, const SettledOperands& ops);

// Host-known sizes and the group count fit the int32 the kernels use.
bool fits_int32(const Geometry& geo);

}  // namespace at::native::grouped_mm
