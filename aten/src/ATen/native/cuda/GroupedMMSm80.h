#pragma once

// Interface between the host dispatcher (GroupedMMSm80Dispatch.cpp) and the
// CUTLASS 2.x instantiations (GroupedMMSm80_*.cu, one per dtype pair so they
// compile in parallel).

#include <ATen/native/cuda/GroupedMMKernels.h>

namespace at::native::grouped_mm::sm80 {

// Leading dimensions, in elements, of the per-group matrices: the same for
// every group (only base pointers and sizes vary).
struct LeadingDims {
  int64_t a;
  int64_t b;
  int64_t d;
};

// Threadblock tile of every SM80 instantiation. The dispatcher bounds the
// total tile count with it: CUTLASS's device-side scheduler counts tiles
// across all groups in int32.
constexpr int64_t kTileM = 128;
constexpr int64_t kTileN = 128;

// Vector width of global loads and stores, in bytes. CUTLASS 2.x iterators
// predicate whole vectors, so every operand's base address, leading dim,
// group stride and contiguous extent must be a multiple of it.
enum class Access { k16Bytes, k4Bytes };

constexpr int64_t access_bytes(Access access) {
  return access == Access::k16Bytes ? 16 : 4;
}

// Launches D = A @ B for every group: A row-major (K contiguous) when
// kARowMajor, else column-major; B row-major (N contiguous) when kBRowMajor,
// else column-major; D row-major. Returns nullptr once launched, or a
// message saying what failed (raising is left to the .cpp caller).
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm80(const LaunchArgs& args, const LeadingDims& ld,
                     Access access);

}  // namespace at::native::grouped_mm::sm80
