#pragma once

// The one SM-carveout policy. Every GEMM path asks this file how many SMs it
// may use; none reads the context setting on its own.
//
// k = at::globalContext()._SMCarveout_EXPERIMENTAL() means "leave k SMs free
// for communication kernels". Valid values are 0 <= k < SMs; unset or 0 means
// no carveout and no overhead.

#include <cstdint>
#include <optional>

namespace at::cuda {

// The carveout the context asks for, 0 when unset.
int64_t requested_sm_carveout();

// Raises a c10::Error when `carveout` is negative. Callers that know the
// device use sm_count_after_carveout(), which also checks the upper bound.
void check_sm_carveout(int64_t carveout);

// SMs a GEMM may use on a device with `total_sms` SMs when `carveout` SMs
// must stay free. Raises a c10::Error naming the valid range when the
// carveout is negative or leaves no SM.
int64_t sm_count_after_carveout(int64_t total_sms, int64_t carveout);

// SMs a GEMM may use on a device with `total_sms` SMs under the context's
// carveout: `total_sms` when no carveout is set. Persistent kernels size
// their grid with it.
int64_t effective_sm_count(int64_t total_sms);

// The value for cuBLAS's cublasSetSmCountTarget and cuBLASLt's
// CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET under the context's carveout: 0 (the
// libraries' "use every SM") when no carveout is set, else total_sms - k.
int32_t blas_sm_count_target(int64_t total_sms);

// SMs of the CUDA green-context partition that confines a GEMM whose kernels
// are not persistent (see GreenContextStreamCUDA.h): SMs - k rounded DOWN to a
// multiple of `alignment`, so the partition never exceeds the budget.
// `min_partition` and `alignment` are the driver's SM-partition granularity
// (cuDevSmResourceSplitByCount; 8 and 8 on SM90). Returns `total_sms` for
// k = 0. Raises a c10::Error naming k when k is out of range or when the
// rounded count is below `min_partition`: using every SM instead would
// silently break the carveout.
int64_t green_context_sm_count(
    int64_t total_sms,
    int64_t carveout,
    int64_t min_partition,
    int64_t alignment);

}  // namespace at::cuda
