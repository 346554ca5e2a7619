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

// SMs a GEMM may use on a device with `total_sms` SMs when `carveout` SMs
// must stay free. Raises a c10::Error naming the valid range when the
// carveout is negative or leaves no SM.
int64_t sm_count_after_carveout(int64_t total_sms, int64_t carveout);

}  // namespace at::cuda
