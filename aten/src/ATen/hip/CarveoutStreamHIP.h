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

// The cache every ROCm GEMM call site shares. Never destroyed: the HIP
// runtime may already be torn down when static destructors run, so the
// streams live as long as the process (as c10's stream pools do).
CarveoutStreamCache& hip_carveout_stream_cache();

}  // namespace at::cuda
