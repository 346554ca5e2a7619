#pragma once

// HIP implementation of CarveoutStreamBackend and the process-wide cache of
// CU-masked streams that ROCm GEMMs use for the SM carveout. ROCm builds
// only.

#include <ATen/cuda/CUMask.h>
#include <ATen/cuda/CarveoutStreamCache.h>

#include <hip/hip_runtime.h>

#include <memory>

namespace at::cuda {

// Backend over hipExtStreamCreateWithCUMask and hipEvent*.
std::unique_ptr<CarveoutStreamBackend> make_hip_carveout_stream_backend();

// CU count, XCC count and WGP rule of a HIP device (queried once per device).
CUTopology hip_cu_topology(c10::DeviceIndex device);

// XCC-granular carveout (cu_carveout_enabled_count_whole_xcc_rounds in
// CUMask.h): off by default. Process-wide; GEMMs forked after the call use
// it. It pays off on multi-XCC parts (MI300X, MI355X) when the GEMMs fill
// every XCC, as large ones do; it frees up to num_xcc - 1 more CUs than k.
void set_hip_carveout_whole_xcc_rounds(bool enabled);
bool hip_carveout_whole_xcc_rounds();

// CUs the mask for carveout k enables on `device` under the current
// rounding: the partition the stream cache keys on.
int64_t hip_carveout_enabled_cus(c10::DeviceIndex device, int64_t carveout);

// The cache every ROCm GEMM call site shares. Never destroyed: the HIP
// runtime may already be torn down when static destructors run, so the
// streams live as long as the process (as c10's stream pools do).
CarveoutStreamCache& hip_carveout_stream_cache();

}  // namespace at::cuda
