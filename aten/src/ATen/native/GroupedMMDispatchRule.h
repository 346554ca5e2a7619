#pragma once

// Which implementation takes a CUDA _grouped_mm call, decided from facts the
// host knows without a sync. Upstream's bf16 CUTLASS kernel (SM90, SM100)
// keeps the calls it runs sync-free on GPUs where this project has no tuned
// kernel; the device-offset kernels take everything upstream would answer
// with a host sync, an error or a rejection, and the GPUs where they were
// measured faster.

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace at::native::grouped_mm {

// Upstream's CUTLASS grouped GEMM stops at this many groups.
constexpr int64_t kUpstreamMaxGroups = 1024;

struct CallFacts {
  int sm_major = 0;
  int sm_minor = 0;
  c10::ScalarType input_dtype = c10::ScalarType::BFloat16;
  c10::ScalarType out_dtype = c10::ScalarType::BFloat16;
  bool has_bias = false;
  // Offsets given as int32 (upstream takes no other offsets dtype).
  bool offs_int32 = true;
  int64_t groups = 0;
  // Every operand's non-unit strides and data pointer are 16-byte aligned,
  // as upstream's TMA-based kernel requires.
  bool aligned = true;
};

// This project's tensor-core kernels: the Hopper kernels on SM90, the
// CUTLASS 2.x kernels on SM80 to SM89 and SM120.
inline bool has_tuned_kernels(int sm_major, int sm_minor) {
  return sm_major == 8 || (sm_major == 9 && sm_minor == 0) || sm_major == 12;
}

// Upstream runs bf16 in and out on SM90 and SM100 without a sync; it
// rejects a bias, and copies offsets to the host in every other case.
inline bool upstream_runs_sync_free(const CallFacts& f) {
  const bool device = (f.sm_major == 9 && f.sm_minor == 0) || f.sm_major == 10;
  return device && f.input_dtype == c10::ScalarType::BFloat16 &&
      f.out_dtype == c10::ScalarType::BFloat16 && !f.has_bias &&
      f.offs_int32 && f.groups <= kUpstreamMaxGroups && f.aligned;
}

inline bool upstream_takes(const CallFacts& f) {
  return upstream_runs_sync_free(f) &&
      !has_tuned_kernels(f.sm_major, f.sm_minor);
}

}  // namespace at::native::grouped_mm
