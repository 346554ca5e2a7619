#pragma once

// Interface between the host dispatcher (GroupedMMSm90Dispatch.cpp) and the
// CUTLASS instantiations (GroupedMMSm90_*.cu, one per dtype pair and operand
// layout so they compile in parallel).

#include <ATen/native/cuda/GroupedMMKernels.h>

namespace at::native::grouped_mm::sm90 {

// Leading dimensions, in elements, of the per-group matrices. They are the
// same for every group: only base pointers and sizes vary.
struct LeadingDims {
  int64_t a;
  int64_t b;
  int64_t d;
};

// kLarge: 128x256 cooperative tiles, 2-CTA clusters along M (many rows per
// group; the cluster shares each weight tile between two M tiles).
// kMedium: 128x128 pingpong tiles, no cluster: one M tile per group of up to
// 128 rows, so its weights are streamed once without an idle cluster CTA.
// kSmall: 64x128 pingpong tiles (decode-sized groups).
// kSplit (row-grouped calls only): both of the above in one call. The fill
// kernel, which reads every group size, gives each group of at most
// split_rows rows to the medium kernel and every larger group to the large
// kernel (the other kernel sees it as an m = 0 problem); two launches. The
// best config depends on the group-size distribution (results/NOTES.md,
// tile A/B), which the host cannot see without a sync.
enum class TileConfig { kLarge, kMedium, kSmall, kSplit };

struct TileChoice {
  TileConfig config = TileConfig::kLarge;
  int64_t split_rows = 0;  // kSplit only
};

// Launches D = A @ B for every group. A is row-major (K contiguous) when
// kARowMajor, else column-major; B is row-major (N contiguous) when
// kBRowMajor, else column-major; D is row-major. Returns nullptr once
// launched, or a message saying what CUTLASS refused.
template <typename In, typename Out, bool kARowMajor, bool kBRowMajor>
const char* run_sm90(const LaunchArgs& args, const LeadingDims& ld,
                     TileChoice choice);

}  // namespace at::native::grouped_mm::sm90
