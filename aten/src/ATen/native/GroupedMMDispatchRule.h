#pragma once

// Which implementation takes a CUDA _grouped_mm call, decided from facts the
// host knows without a sync. Upstream's _grouped_mm_cuda stays the dispatch
// entry and asks upstream_takes first: its sync-free paths (the bf16 CUTLASS
// kernel on SM90 and SM100, cuBLASLt's grouped GEMM where torch has it) keep
// the calls they run on GPUs where this project has no tuned kernel; the
// device-offset kernels take everything upstream would answer with a host
// sync, an error or a rejection, and the GPUs where they were measured
// faster.

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace at::native::grouped_mm {

// Upstream's CUTLASS grouped GEMM, and its cuBLASLt one, stop at this many
// groups.
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
  // Torch was built with cuBLASLt's grouped GEMM (CUDA 13.3 or later).
  bool upstream_cublaslt = false;
};

// This project's tensor-core kernels: the Hopper kernels on SM90 (the SM80
// ones where the binary lacks the Hopper kernels' sm_90a code), the
// CUTLASS 2.x kernels on SM80 to SM89 and SM120.
inline bool has_tuned_kernels(int sm_major, int sm_minor) {
  return sm_major == 8 || (sm_major == 9 && sm_minor == 0) || sm_major == 12;
}

// Whether the SM80 kernels take a call by default: on SM80 to SM89 and
// SM120; on SM90, the TF32 calls the Hopper route hands them
// (GroupedMMTf32Route.h), and every call where the binary lacks the Hopper
// kernels' sm_90a code (built for plain sm_90 or other GPUs only, they are
// stubs that do no work).
inline bool sm80_kernels_by_default(int sm_major, bool tf32,
                                    bool hopper_kernels_built) {
  if (sm_major == 9) {
    return tf32 || !hopper_kernels_built;
  }
  return sm_major == 8 || sm_major == 12;
}

// Upstream runs bf16 in and out on SM90 and SM100 without a sync (CUTLASS),
// and, where torch has cuBLASLt's grouped GEMM, fp16 in and out with 1 to
// 1024 groups on SM90 to SM11x. It rejects a bias, and copies offsets to the
// host in every other case.
inline bool upstream_runs_sync_free(const CallFacts& f) {
  if (f.has_bias || !f.offs_int32 || !f.aligned ||
      f.groups > kUpstreamMaxGroups) {
    return false;
  }
  const auto same_out = [&f](c10::ScalarType dtype) {
    return f.input_dtype == dtype && f.out_dtype == dtype;
  };
  const bool cutlass = ((f.sm_major == 9 && f.sm_minor == 0) ||
                        f.sm_major == 10) &&
      f.groups >= 1 && same_out(c10::ScalarType::BFloat16);
  const bool cublaslt = f.upstream_cublaslt && f.sm_major >= 9 &&
      f.sm_major <= 11 && f.groups >= 1 && same_out(c10::ScalarType::Half);
  return cutlass || cublaslt;
}

inline bool upstream_takes(const CallFacts& f) {
  return upstream_runs_sync_free(f) &&
      !has_tuned_kernels(f.sm_major, f.sm_minor);
}

}  // namespace at::native::grouped_mm
