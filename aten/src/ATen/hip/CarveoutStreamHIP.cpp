// HIP backend for the masked-stream cache; see CarveoutStreamHIP.h.

#include <ATen/hip/CarveoutStreamHIP.h>

#include <ATen/cuda/CUMask.h>
#include <c10/util/Exception.h>

#include <hip/hip_ext.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

namespace at::cuda {

namespace {

// Devices whose topology we cache; c10 allows at most 64 per process.
constexpr int kMaxDevices = 64;
// Architectures gfx10 and later have four digits ("gfx1030", "gfx1201"),
// older ones three ("gfx90a", "gfx942", "gfx950").
constexpr size_t kGfx10ArchDigits = 4;

// A local check instead of C10_HIP_CHECK keeps this file free of ATen's HIP
// context headers, so it compiles against the HIP runtime headers alone.
void check_hip(hipError_t status, const char* what) {
  TORCH_CHECK(
      status == hipSuccess, what, " failed: ", hipGetErrorString(status));
}

// Makes `device` current for the object's lifetime. Streams and events are
// created on the current device.
class HipDeviceScope {
 public:
  explicit HipDeviceScope(c10::DeviceIndex device) {
    check_hip(hipGetDevice(&previous_), "hipGetDevice");
    if (previous_ != device) {
      check_hip(hipSetDevice(device), "hipSetDevice");
    }
  }
  ~HipDeviceScope() {
    (void)hipSetDevice(previous_);
  }
  HipDeviceScope(const HipDeviceScope&) = delete;
  HipDeviceScope& operator=(const HipDeviceScope&) = delete;

 private:
  int previous_ = 0;
};

bool uses_wgp_pairs(const char* gcn_arch_name) {
  if (std::strncmp(gcn_arch_name, "gfx", 3) != 0) {
    return false;
  }
  const char* digits = gcn_arch_name + 3;
  return std::strcspn(digits, ":") >= kGfx10ArchDigits;
}

int64_t query_num_xcc(c10::DeviceIndex device) {
#if HIP_VERSION_MAJOR >= 7
  int num_xcc = 1;
  check_hip(
      hipDeviceGetAttribute(
          &num_xcc, hipDeviceAttributeNumberOfXccs, device),
      "hipDeviceGetAttribute(hipDeviceAttributeNumberOfXccs)");
  return num_xcc > 0 ? num_xcc : 1;
#else
  // No XCC query before HIP 7. build_cu_mask's mask is balanced for every
  // XCC count, so assuming 1 cannot unbalance it.
  (void)device;
  return 1;
#endif
}

// Physical CUs, one CU-mask bit each. multiProcessorCount, the unit of the
// carveout k, counts WGPs (two CUs) on gfx10+ in WGP mode, HIP's default;
// hipDeviceAttributePhysicalMultiProcessorCount counts CUs in every mode.
int64_t query_physical_cus(
    c10::DeviceIndex device,
    int64_t sm_count,
    bool wgp_pairs) {
  int physical = 0;
  const hipError_t status = hipDeviceGetAttribute(
      &physical, hipDeviceAttributePhysicalMultiProcessorCount, device);
  if (status == hipSuccess && physical > 0) {
    return physical;
  }
  (void)hipGetLastError();  // clear the sticky error of the failed query
  // Before gfx10 every SM is one CU; after it, guessing could halve or
  // double the mask, so refuse.
  TORCH_CHECK(
      !wgp_pairs,
      "ROCm SM carveout: hipDeviceGetAttribute("
      "hipDeviceAttributePhysicalMultiProcessorCount) failed (",
      hipGetErrorString(status), "), and on gfx10+ the CU count cannot be "
      "derived from multiProcessorCount (WGP or CU mode)");
  return sm_count;
}

CUTopology query_topology(c10::DeviceIndex device) {
  hipDeviceProp_t prop;
  check_hip(hipGetDeviceProperties(&prop, device), "hipGetDeviceProperties");
  const int64_t sm_count = prop.multiProcessorCount;
  TORCH_CHECK(
      sm_count > 0, "ROCm SM carveout: device ", static_cast<int>(device),
      " reports multiProcessorCount = ", sm_count);
  CUTopology topo;
  topo.wgp_pairs = uses_wgp_pairs(prop.gcnArchName);
  topo.total_cus = query_physical_cus(device, sm_count, topo.wgp_pairs);
  TORCH_CHECK(
      topo.total_cus % sm_count == 0,
      "ROCm SM carveout: device ", static_cast<int>(device), " has ",
      topo.total_cus, " CUs, not a multiple of its multiProcessorCount ",
      sm_count);
  topo.cus_per_sm = topo.total_cus / sm_count;
  topo.num_xcc = query_num_xcc(device);
  return topo;
}

std::atomic<bool>& whole_xcc_rounds() {
  static std::atomic<bool> enabled{false};
  return enabled;
}

class HipCarveoutStreamBackend final : public CarveoutStreamBackend {
 public:
  // The partition is the number of CUs the mask enables, so every k (and
  // either rounding) that gives the same mask shares the cache's entries.
  int64_t partition(c10::DeviceIndex device, int64_t carveout) override {
    return hip_carveout_enabled_cus(device, carveout);
  }

  CarveoutStream create_restricted_stream(
      c10::DeviceIndex device,
      int64_t partition) override {
    const std::vector<uint32_t> mask =
        cu_mask_enabling(hip_cu_topology(device).total_cus, partition);
    HipDeviceScope scope(device);
    hipStream_t stream = nullptr;
    check_hip(
        hipExtStreamCreateWithCUMask(
            &stream, static_cast<uint32_t>(mask.size()), mask.data()),
        "hipExtStreamCreateWithCUMask");
    return stream;
  }

  // A masked stream is an ordinary stream of the device's context, so one
  // kind of event serves both ends.
  CarveoutEvent create_event(
      c10::DeviceIndex device,
      CarveoutStream /*owner*/) override {
    HipDeviceScope scope(device);
    hipEvent_t event = nullptr;
    check_hip(
        hipEventCreateWithFlags(&event, hipEventDisableTiming),
        "hipEventCreateWithFlags");
    return event;
  }

  void record(CarveoutEvent event, CarveoutStream stream) override {
    check_hip(
        hipEventRecord(
            static_cast<hipEvent_t>(event), static_cast<hipStream_t>(stream)),
        "hipEventRecord");
  }

  void wait(CarveoutStream stream, CarveoutEvent event) override {
    check_hip(
        hipStreamWaitEvent(
            static_cast<hipStream_t>(stream), static_cast<hipEvent_t>(event),
            0),
        "hipStreamWaitEvent");
  }

  bool is_capturing(CarveoutStream stream) override {
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    check_hip(
        hipStreamIsCapturing(static_cast<hipStream_t>(stream), &status),
        "hipStreamIsCapturing");
    // An invalidated capture is still a capture: do not fork into it.
    return status != hipStreamCaptureStatusNone;
  }

  void destroy_stream(
      c10::DeviceIndex device, CarveoutStream stream) noexcept override {
    (void)device;
    (void)hipStreamDestroy(static_cast<hipStream_t>(stream));
  }

  void destroy_event(
      c10::DeviceIndex device, CarveoutEvent event) noexcept override {
    (void)device;
    (void)hipEventDestroy(static_cast<hipEvent_t>(event));
  }
};

}  // namespace

CUTopology hip_cu_topology(c10::DeviceIndex device) {
  TORCH_CHECK(
      device >= 0 && device < kMaxDevices,
      "hip_cu_topology: device must be in [0, ", kMaxDevices, "), got ",
      static_cast<int>(device));
  static std::mutex mutex;
  static std::array<CUTopology, kMaxDevices> known{};
  std::lock_guard<std::mutex> lock(mutex);
  CUTopology& topo = known[device];
  if (topo.total_cus == 0) {
    topo = query_topology(device);
  }
  return topo;
}

void set_hip_carveout_whole_xcc_rounds(bool enabled) {
  whole_xcc_rounds().store(enabled);
}

bool hip_carveout_whole_xcc_rounds() {
  return whole_xcc_rounds().load();
}

int64_t hip_carveout_enabled_cus(c10::DeviceIndex device, int64_t carveout) {
  return sm_carveout_enabled_cus(
      hip_cu_topology(device), carveout, hip_carveout_whole_xcc_rounds());
}

std::unique_ptr<CarveoutStreamBackend> make_hip_carveout_stream_backend() {
  return std::make_unique<HipCarveoutStreamBackend>();
}

CarveoutStreamCache& hip_carveout_stream_cache() {
  static auto* cache =
      new CarveoutStreamCache(make_hip_carveout_stream_backend());
  return *cache;
}

}  // namespace at::cuda
