#pragma once

// Where the groups of a call grouped along K (2d x 2d) sit in the K-major
// copies TF32 WGMMA reads on Hopper: TMA needs every group's base 16-byte
// aligned, and the offsets put group starts anywhere, so each copy starts
// every group at a multiple of `pad` elements. Plain arithmetic, on host
// and device, so it is testable on the CPU.

#include <c10/macros/Macros.h>

#include <cstdint>

namespace at::native::grouped_mm {

// Where group g's K range, starting at `start` in the operands, starts in
// the padded copy: the next multiple of pad, plus one pad per earlier
// group: each group moves right by at least one element more than the one
// before it, so the ranges never overlap. Every range lies below
// padded_k_extent(extent, groups, pad).
C10_HOST_DEVICE inline int64_t padded_k_start(
    int64_t start, int64_t g, int64_t pad) {
  return (start + pad - 1) / pad * pad + g * pad;
}

// The K width of the padded copy, a multiple of pad.
C10_HOST_DEVICE inline int64_t padded_k_extent(
    int64_t extent, int64_t groups, int64_t pad) {
  return (extent + pad - 1) / pad * pad + groups * pad;
}

}  // namespace at::native::grouped_mm
