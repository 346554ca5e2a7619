// Green-context streams for the CUDA SM carveout; see
// GreenContextStreamCUDA.h. Host code only, compiled by the C++ compiler.

// The ROCm build hipifies ATen/cuda/*.cpp; this file is CUDA-only, and the
// ROCm side of the carveout lives in ATen/hip/ (CU-masked streams).
#if !defined(USE_ROCM)

#include <ATen/cuda/GreenContextStreamCUDA.h>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/SMCarveoutCUDA.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

// Green contexts (cuGreenCtxStreamCreate) are in the driver API from 12.8
// on, the version c10::cuda::DriverAPI requests their entry points at.
#if defined(CUDA_VERSION) && CUDA_VERSION >= 12080
#define AT_CUDA_HAS_GREEN_CONTEXTS 1
#include <c10/cuda/driver_api.h>
#else
#define AT_CUDA_HAS_GREEN_CONTEXTS 0
#endif

namespace at::cuda {
namespace {

// Devices whose partition rule we cache; c10 allows at most 64 per process.
constexpr int kMaxDevices = 64;

// How the driver partitions SMs: the smallest partition and the multiple
// every partition size is.
struct SmPartitionRule {
  int64_t min_partition = 0;
  int64_t alignment = 0;
};

// The CUDA driver API documentation's guideline (Green Contexts section, and
// cuDevSmResourceSplitByCount before 13.0): "On Compute Architecture 9.0+:
// The minimum count is 8 SMs and must be a multiple of 8", 8.X: at least 4,
// a multiple of 2; 6.X and 7.X: at least 2, a multiple of 2.
std::optional<SmPartitionRule> documented_rule(int major) {
  if (major >= 9) {
    return SmPartitionRule{8, 8};
  }
  if (major == 8) {
    return SmPartitionRule{4, 2};
  }
  if (major >= 6) {
    return SmPartitionRule{2, 2};
  }
  return std::nullopt;
}

// What we know about a device, probed once.
struct GreenContextDevice {
  bool probed = false;
  std::string unavailable;  // empty: green contexts work here
  int64_t total_sms = 0;
  SmPartitionRule rule;
};

// The green context behind each stream the backend created.
struct GreenStream {
#if AT_CUDA_HAS_GREEN_CONTEXTS
  CUgreenCtx context = nullptr;
#endif
  int64_t sm_count = 0;
};

std::mutex& green_streams_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::unordered_map<CarveoutStream, GreenStream>& green_streams() {
  static auto* streams = new std::unordered_map<CarveoutStream, GreenStream>;
  return *streams;
}

#if AT_CUDA_HAS_GREEN_CONTEXTS

// The CUDA version PyTorch itself must be built with for
// c10::cuda::DriverAPI to have the green-context entry points.
constexpr long kGreenContextCudaVersion = 12080;

// PyTorch's driver API table; its green-context members are read only
// after missing_green_context_api() found them.
const c10::cuda::DriverAPI& driver() {
  return *c10::cuda::DriverAPI::get();
}

std::string driver_error(CUresult status) {
  const char* text = nullptr;
  if (driver().cuGetErrorString_(status, &text) != CUDA_SUCCESS ||
      text == nullptr) {
    return "CUresult " + std::to_string(static_cast<int>(status));
  }
  return text;
}

void check_driver(CUresult status, const char* what) {
  TORCH_CHECK(
      status == CUDA_SUCCESS, "sm_carveout: ", what, " failed: ",
      driver_error(status));
}

// Why the green-context entry points cannot be called, or nullopt. They are
// DriverAPI members only when PyTorch was built with CUDA 12.8+ (a file
// built against an installed PyTorch may see a newer toolkit than PyTorch
// was built with), and null when the driver predates them.
std::optional<std::string> missing_green_context_api() {
  const long built = at::detail::getCUDAHooks().versionCUDART();
  if (built < kGreenContextCudaVersion) {
    return "PyTorch was built with CUDA " + std::to_string(built) +
        ", whose c10::cuda::DriverAPI has no green-context entry points";
  }
  const c10::cuda::DriverAPI& api = driver();
  if (api.cuDeviceGet_ != nullptr && api.cuDeviceGetDevResource_ != nullptr &&
      api.cuDevSmResourceSplitByCount_ != nullptr &&
      api.cuDevResourceGenerateDesc_ != nullptr &&
      api.cuGreenCtxCreate_ != nullptr && api.cuGreenCtxDestroy_ != nullptr &&
      api.cuGreenCtxStreamCreate_ != nullptr &&
      api.cuCtxFromGreenCtx_ != nullptr && api.cuCtxPushCurrent_ != nullptr &&
      api.cuCtxPopCurrent_ != nullptr) {
    return std::nullopt;
  }
  int version = 0;
  (void)cudaDriverGetVersion(&version);
  return "the CUDA driver (version " + std::to_string(version) +
      ") has no green-context entry points; they need a 12.8 or later driver";
}

// The device's whole SM resource, the input of every split.
CUresult device_sm_resource(c10::DeviceIndex device, CUdevice* dev,
                            CUdevResource* resource) {
  CUresult status = driver().cuDeviceGet_(dev, device);
  if (status != CUDA_SUCCESS) {
    return status;
  }
  *resource = CUdevResource{};
  return driver().cuDeviceGetDevResource_(
      *dev, resource, CU_DEV_RESOURCE_TYPE_SM);
}

// The documented rule, made stricter by what the driver reports (CUDA 13.0+
// headers have the fields; an older driver leaves them 0).
std::optional<SmPartitionRule> partition_rule(
    c10::DeviceIndex device,
    const CUdevResource& resource) {
  std::optional<SmPartitionRule> rule =
      documented_rule(getDeviceProperties(device)->major);
  if (!rule.has_value()) {
    return std::nullopt;
  }
#if CUDA_VERSION >= 13000
  rule->min_partition = std::max<int64_t>(
      rule->min_partition, resource.sm.minSmPartitionSize);
  rule->alignment = std::max<int64_t>(
      rule->alignment, resource.sm.smCoscheduledAlignment);
#else
  (void)resource;
#endif
  return rule;
}

GreenContextDevice probe_device(c10::DeviceIndex device) {
  GreenContextDevice info;
  info.probed = true;
  if (auto missing = missing_green_context_api()) {
    info.unavailable = std::move(*missing);
    return info;
  }
  CUdevice dev = 0;
  CUdevResource resource{};
  const CUresult status = device_sm_resource(device, &dev, &resource);
  if (status != CUDA_SUCCESS) {
    info.unavailable =
        "cuDeviceGetDevResource(SM) failed: " + driver_error(status);
    return info;
  }
  const std::optional<SmPartitionRule> rule =
      partition_rule(device, resource);
  if (!rule.has_value()) {
    info.unavailable = "compute capability " +
        std::to_string(getDeviceProperties(device)->major) +
        ".x has no SM partitions";
    return info;
  }
  info.total_sms = resource.sm.smCount;
  info.rule = *rule;
  return info;
}

#else  // !AT_CUDA_HAS_GREEN_CONTEXTS

GreenContextDevice probe_device(c10::DeviceIndex /*device*/) {
  GreenContextDevice info;
  info.probed = true;
  info.unavailable = "built with CUDA " + std::to_string(CUDA_VERSION) +
      "; green contexts need a 12.8 or later toolkit";
  return info;
}

#endif  // AT_CUDA_HAS_GREEN_CONTEXTS

const GreenContextDevice& green_context_device(c10::DeviceIndex device) {
  TORCH_CHECK(
      device >= 0 && device < kMaxDevices,
      "sm_carveout: device must be in [0, ", kMaxDevices, "), got ",
      static_cast<int>(device));
  static std::mutex mutex;
  static std::array<GreenContextDevice, kMaxDevices> known{};
  std::lock_guard<std::mutex> lock(mutex);
  GreenContextDevice& info = known[device];
  if (!info.probed) {
    info = probe_device(device);
  }
  return info;
}

const GreenContextDevice& available_device(c10::DeviceIndex device) {
  const GreenContextDevice& info = green_context_device(device);
  TORCH_CHECK(
      info.unavailable.empty(), "sm_carveout: CUDA green contexts are "
      "unavailable on device ", static_cast<int>(device), ": ",
      info.unavailable);
  return info;
}

#if AT_CUDA_HAS_GREEN_CONTEXTS

// Splits one partition of at most `partition` SMs off the device. The
// driver may round a request up; a request it rounds past `partition` is
// retried one alignment step lower, so the carveout of every k that plans
// this partition holds.
CUdevResource split_partition(
    const CUdevResource& whole,
    int64_t partition,
    const SmPartitionRule& rule) {
  CUresult last = CUDA_SUCCESS;
  for (int64_t count = partition; count >= rule.min_partition;
       count -= rule.alignment) {
    CUdevResource part{};
    unsigned int groups = 1;
    last = driver().cuDevSmResourceSplitByCount_(
        &part, &groups, &whole, nullptr, 0, static_cast<unsigned>(count));
    if (last == CUDA_SUCCESS && groups == 1 && part.sm.smCount > 0 &&
        part.sm.smCount <= partition) {
      return part;
    }
  }
  TORCH_CHECK(
      false, "sm_carveout: the CUDA driver has no green-context partition "
      "of at most ", partition, " SMs",
      last == CUDA_SUCCESS ? std::string()
                           : " (last error: " + driver_error(last) + ")");
}

// Makes a green context current on this thread for one scope, so runtime
// calls create objects in it.
class GreenContextCurrent {
 public:
  explicit GreenContextCurrent(CUgreenCtx green) {
    CUcontext context = nullptr;
    check_driver(driver().cuCtxFromGreenCtx_(&context, green),
                 "cuCtxFromGreenCtx");
    check_driver(driver().cuCtxPushCurrent_(context), "cuCtxPushCurrent");
  }
  ~GreenContextCurrent() {
    CUcontext popped = nullptr;
    (void)driver().cuCtxPopCurrent_(&popped);
  }
  GreenContextCurrent(const GreenContextCurrent&) = delete;
  GreenContextCurrent& operator=(const GreenContextCurrent&) = delete;
};

CUgreenCtx green_context_of(CarveoutStream stream) {
  std::lock_guard<std::mutex> lock(green_streams_mutex());
  auto found = green_streams().find(stream);
  TORCH_INTERNAL_ASSERT(found != green_streams().end(),
                        "sm_carveout: not a green-context stream");
  return found->second.context;
}

// A green context of `partition` SMs on `device`, and its driver-given size.
struct GreenContext {
  CUgreenCtx context = nullptr;
  int64_t sm_count = 0;
};

GreenContext create_green_context(c10::DeviceIndex device, int64_t partition) {
  const GreenContextDevice& info = available_device(device);
  CUdevice dev = 0;
  CUdevResource whole{};
  check_driver(device_sm_resource(device, &dev, &whole),
               "cuDeviceGetDevResource");
  CUdevResource part = split_partition(whole, partition, info.rule);
  CUdevResourceDesc desc = nullptr;
  check_driver(driver().cuDevResourceGenerateDesc_(&desc, &part, 1),
               "cuDevResourceGenerateDesc");
  CUgreenCtx green = nullptr;
  check_driver(
      driver().cuGreenCtxCreate_(
          &green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM),
      "cuGreenCtxCreate");
  return GreenContext{green, static_cast<int64_t>(part.sm.smCount)};
}

class GreenContextStreamBackend final : public CarveoutStreamBackend {
 public:
  int64_t partition(c10::DeviceIndex device, int64_t carveout) override {
    return green_context_partition_sm_count(device, carveout);
  }

  // Streams come and go with the cache's entries (one per caller stream);
  // the green context of each (device, partition) is created once and
  // kept, as there are only SMs / alignment partitions per device.
  CarveoutStream create_restricted_stream(
      c10::DeviceIndex device,
      int64_t partition) override {
    const GreenContext green = context_for(device, partition);
    CUstream stream = nullptr;
    check_driver(
        driver().cuGreenCtxStreamCreate_(
            &stream, green.context, CU_STREAM_NON_BLOCKING, 0),
        "cuGreenCtxStreamCreate");
    std::lock_guard<std::mutex> lock(green_streams_mutex());
    green_streams()[stream] = GreenStream{green.context, green.sm_count};
    return stream;
  }

  // cudaEventRecord needs an event of the stream's context, and a green
  // context's streams have their own: the join event is created with the
  // green context current. Waiting on an event of another context is fine.
  CarveoutEvent create_event(c10::DeviceIndex device, CarveoutStream owner)
      override {
    c10::cuda::CUDAGuard device_guard(device);
    std::optional<GreenContextCurrent> current;
    if (owner != nullptr) {
      current.emplace(green_context_of(owner));
    }
    cudaEvent_t event = nullptr;
    C10_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }

  void record(CarveoutEvent event, CarveoutStream stream) override {
    C10_CUDA_CHECK(cudaEventRecord(
        static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  }

  void wait(CarveoutStream stream, CarveoutEvent event) override {
    C10_CUDA_CHECK(cudaStreamWaitEvent(
        static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event),
        0));
  }

  bool is_capturing(CarveoutStream stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(
        cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status));
    // An invalidated capture is still a capture: do not fork into it.
    return status != cudaStreamCaptureStatusNone;
  }

  // The green context stays (see create_restricted_stream); the driver
  // frees the stream once the work queued on it is done.
  void destroy_stream(
      c10::DeviceIndex /*device*/, CarveoutStream stream) noexcept override {
    {
      std::lock_guard<std::mutex> lock(green_streams_mutex());
      green_streams().erase(stream);
    }
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }

  void destroy_event(
      c10::DeviceIndex /*device*/, CarveoutEvent event) noexcept override {
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }

 private:
  GreenContext context_for(c10::DeviceIndex device, int64_t partition) {
    std::lock_guard<std::mutex> lock(contexts_mutex_);
    auto found = contexts_.find({device, partition});
    if (found != contexts_.end()) {
      return found->second;
    }
    const GreenContext green = create_green_context(device, partition);
    contexts_.emplace(std::make_pair(device, partition), green);
    return green;
  }

  std::mutex contexts_mutex_;
  std::map<std::pair<c10::DeviceIndex, int64_t>, GreenContext> contexts_;
};

#endif  // AT_CUDA_HAS_GREEN_CONTEXTS

}  // namespace

std::optional<std::string> green_context_unavailable_reason(
    c10::DeviceIndex device) {
  const GreenContextDevice& info = green_context_device(device);
  if (info.unavailable.empty()) {
    return std::nullopt;
  }
  return info.unavailable;
}

int64_t green_context_partition_sm_count(
    c10::DeviceIndex device,
    int64_t carveout) {
  const GreenContextDevice& info = available_device(device);
  return green_context_sm_count(
      info.total_sms, carveout, info.rule.min_partition, info.rule.alignment);
}

std::unique_ptr<CarveoutStreamBackend> make_green_context_stream_backend() {
#if AT_CUDA_HAS_GREEN_CONTEXTS
  return std::make_unique<GreenContextStreamBackend>();
#else
  TORCH_CHECK(false, "sm_carveout: ", probe_device(0).unavailable);
#endif
}

CarveoutStreamCache& green_context_stream_cache() {
  static auto* cache =
      new CarveoutStreamCache(make_green_context_stream_backend());
  return *cache;
}

int64_t green_context_stream_sm_count(CarveoutStream stream) {
  std::lock_guard<std::mutex> lock(green_streams_mutex());
  auto found = green_streams().find(stream);
  return found == green_streams().end() ? 0 : found->second.sm_count;
}

// Reads nothing from the context: `carveout` is the one k of this call.
GreenContextGemmScope::GreenContextGemmScope(bool confine, int64_t carveout)
    : sm_count_target_(current_device_sm_count_target(carveout)) {
  if (!confine || carveout == 0) {
    return;
  }
  const c10::DeviceIndex device = c10::cuda::current_device();
  if (const auto reason = green_context_unavailable_reason(device)) {
    TORCH_WARN_ONCE(
        "sm_carveout: CUDA green contexts are unavailable (", *reason,
        "), so float32, float64 and complex GEMMs get only the cuBLAS SM "
        "count target under the carveout, and their kernels may still use "
        "every SM");
    return;
  }
  const c10::cuda::CUDAStream current =
      c10::cuda::getCurrentCUDAStream(device);
  if (const int64_t nested = green_context_stream_sm_count(
          static_cast<CarveoutStream>(current.stream()))) {
    sm_count_target_ = static_cast<int32_t>(nested);  // already confined
    return;
  }
  fork_.emplace(green_context_stream_cache(), device, carveout,
                static_cast<CarveoutStream>(current.stream()));
  if (!fork_->restricted()) {
    return;  // graph capture: see CarveoutStreamCache.h
  }
  stream_guard_.emplace(c10::cuda::getStreamFromExternal(
      static_cast<cudaStream_t>(fork_->stream()), device));
  sm_count_target_ =
      static_cast<int32_t>(green_context_stream_sm_count(fork_->stream()));
}

void GreenContextGemmScope::join() {
  stream_guard_.reset();  // the caller's stream is current again
  if (fork_.has_value()) {
    fork_->join();
  }
}

GreenContextGemmScope::~GreenContextGemmScope() {
  // Restore the stream before the join; CarveoutStreamScope's destructor
  // joins (and only warns on failure) when join() was not called.
  stream_guard_.reset();
  fork_.reset();
}

}  // namespace at::cuda

#endif  // !defined(USE_ROCM)
