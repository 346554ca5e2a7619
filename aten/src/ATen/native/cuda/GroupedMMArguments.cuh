#pragma once

// Turns device-resident group offsets into per-group problems without a
// device-to-host copy. Every grouped-mm kernel (generic, SM80, SM90) reads its
// per-group sizes and pointers through grouped_mm_group(), so there is one
// definition of what offs means.
//
// Bad offsets are clamped, never trusted: start = clamp(offs[g-1], 0, extent)
// and end = clamp(offs[g], start, extent). A decreasing offset gives an empty
// group and an offset past the end is cut at the end, so no kernel reads or
// writes out of bounds. Checked mode (GroupedMMValidation.h) reports them.

#include <ATen/native/GroupedMMValidation.h>
#include <ATen/native/cuda/GroupedMMPaddedK.h>

// __device__ for host-only translation units that include this through
// GroupedMMKernels.h.
#include <cuda_runtime.h>

#include <cstdint>

namespace at::native::grouped_mm {

// Which dimension of the per-group problem the offsets split.
enum class GroupedDim : int32_t { kNone, kRows, kCols, kReduction };

// Element strides of one operand seen as per-group matrices.
struct OperandStrides {
  int64_t group;  // between groups of a 3d operand, 0 for a 2d operand
  int64_t row;    // along the first matrix dim (m for A and D, k for B)
  int64_t col;    // along the second matrix dim (k for A, n for B and D)
};

// Host-known description of a call, passed by value to kernels.
struct Geometry {
  int64_t num_groups;
  GroupedDim grouped;
  int64_t extent;  // size of the grouped dimension
  int64_t m, n, k;  // sizes of the dimensions that are not grouped
  OperandStrides a, b, d;
  // Grouped along K only: 0 when A and B hold group g's K range at its
  // offsets, else the pad of K-major copies that hold it at
  // padded_k_start(start, g, k_group_pad) (GroupedMMPaddedK.h).
  int64_t k_group_pad = 0;
};

// One group's problem: D (m x n) = A (m x k) @ B (k x n), as element
// offsets from the operands' base pointers.
struct Group {
  int64_t m, n, k;
  int64_t a_offset, b_offset, d_offset;
  int64_t start;  // first index in the grouped dimension
};

template <typename OffsT>
__device__ __forceinline__ int64_t clamp_offset(
    const OffsT* offs, int64_t g, int64_t lo, int64_t extent) {
  const int64_t v = static_cast<int64_t>(offs[g]);
  return v < lo ? lo : (v > extent ? extent : v);
}

// End of the last group, clamped: where the zeroed tail starts.
template <typename OffsT>
__device__ __forceinline__ int64_t clamped_total(
    const OffsT* offs, int64_t num_groups, int64_t extent) {
  if (num_groups == 0) {
    return 0;
  }
  const int64_t v = static_cast<int64_t>(offs[num_groups - 1]);
  return v < 0 ? 0 : (v > extent ? extent : v);
}

template <typename OffsT>
__device__ __forceinline__ Group group_problem(
    const Geometry& geo, const OffsT* offs, int64_t g) {
  int64_t start = 0;
  int64_t size = 0;
  if (geo.grouped != GroupedDim::kNone) {
    // Both ends are clamped into [0, extent] and the end to at least the
    // start, so a group stays inside the operands whatever offs holds.
    // Groups can still overlap when offs decreases (see the note below).
    int64_t prev_end = 0;
    if (g > 0) {
      prev_end = clamp_offset(offs, g - 1, 0, geo.extent);
    }
    start = prev_end;
    size = clamp_offset(offs, g, start, geo.extent) - start;
  }
  Group p;
  p.start = start;
  p.m = geo.grouped == GroupedDim::kRows ? size : geo.m;
  p.n = geo.grouped == GroupedDim::kCols ? size : geo.n;
  p.k = geo.grouped == GroupedDim::kReduction ? size : geo.k;
  p.a_offset = g * geo.a.group;
  p.b_offset = g * geo.b.group;
  p.d_offset = g * geo.d.group;
  switch (geo.grouped) {
    case GroupedDim::kRows:
      p.a_offset += start * geo.a.row;
      p.d_offset += start * geo.d.row;
      break;
    case GroupedDim::kCols:
      p.b_offset += start * geo.b.col;
      p.d_offset += start * geo.d.col;
      break;
    case GroupedDim::kReduction: {
      const int64_t k_at = geo.k_group_pad > 0
          ? padded_k_start(start, g, geo.k_group_pad)
          : start;
      p.a_offset += k_at * geo.a.col;
      p.b_offset += k_at * geo.b.row;
      break;
    }
    case GroupedDim::kNone:
      break;
  }
  return p;
}

// Note on clamping: group g starts at clamp(offs[g-1], 0, extent) while group
// g-1 ended at max(its start, that value). With decreasing offsets groups can
// therefore overlap; they always stay inside the operands, which is all the
// unchecked mode promises (the result of bad offsets is unspecified).

}  // namespace at::native::grouped_mm
