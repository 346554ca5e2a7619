#pragma once

// Cache of CU-masked streams for the ROCm SM carveout.
//
// A GEMM that must leave k CUs free runs on a stream created with a CU mask
// (see CUMask.h). This cache owns those streams: one stream and one event per
// (device, k), created on first use, reused by every later call and thread,
// and destroyed with the cache. Upstream kept a single function-level static
// stream for all devices, recreated it whenever k changed, and created (and
// leaked) a new event on every call.
//
// Ordering with the caller's current stream, per GEMM:
//   fork: record(event, current); wait(masked, event)  -> GEMM on masked
//   join: record(event, masked);  wait(current, event)
// Both steps reuse the entry's one event. A wait orders against the record
// that precedes it at enqueue time, so re-recording the event later is safe;
// each record+wait pair runs under the entry's lock so two threads cannot
// interleave their records between each other's waits.
//
// Graph capture (documented choice): while the current stream is capturing,
// fork returns the current stream and enqueues nothing. The CU mask is a
// property of the hardware queue behind a stream, and a graph records kernel
// nodes, not queues: a GEMM forked onto the masked stream during capture
// would replay on the replay stream's queue with every CU, so the carveout
// would silently not apply. Passing through keeps capture working and makes
// the behaviour explicit; the hipBLASLt SM_COUNT_TARGET hint, a descriptor
// attribute, still applies to captured GEMMs where the library has it.
//
// The backend interface keeps this file free of HIP, so CPU tests drive the
// cache with a counting double (FakeCarveoutStreamBackend.h) and the HIP
// build uses CarveoutStreamHIP.cpp.

#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace at::cuda {

// Opaque runtime handles (hipStream_t / hipEvent_t on ROCm).
using CarveoutStream = void*;
using CarveoutEvent = void*;

// What the mask builder needs to know about a device (see CUMask.h).
struct CUTopology {
  int64_t total_cus = 0;  // physical CUs: one mask bit each
  int64_t num_xcc = 1;
  bool wgp_pairs = false;  // gfx10+: CUs are enabled in WGP pairs
  // CUs per SM as the runtime counts SMs (multiProcessorCount), the unit of
  // the carveout k: 2 on gfx10+ in WGP mode (HIP counts WGPs), else 1.
  int64_t cus_per_sm = 1;
};

// The runtime operations the cache needs; one implementation per runtime.
class CarveoutStreamBackend {
 public:
  virtual ~CarveoutStreamBackend() = default;
  virtual CUTopology topology(c10::DeviceIndex device) = 0;
  virtual CarveoutStream create_masked_stream(
      c10::DeviceIndex device,
      const std::vector<uint32_t>& mask) = 0;
  virtual CarveoutEvent create_event(c10::DeviceIndex device) = 0;
  virtual void record(CarveoutEvent event, CarveoutStream stream) = 0;
  virtual void wait(CarveoutStream stream, CarveoutEvent event) = 0;
  virtual bool is_capturing(CarveoutStream stream) = 0;
  // Called from the cache's destructor, which must not throw.
  virtual void destroy_stream(
      c10::DeviceIndex device, CarveoutStream stream) noexcept = 0;
  virtual void destroy_event(
      c10::DeviceIndex device, CarveoutEvent event) noexcept = 0;
};

// Result of fork(): the stream to launch on, and what join() needs.
struct CarveoutFork {
  CarveoutStream stream = nullptr;   // launch the GEMM here
  CarveoutStream current = nullptr;  // the caller's stream
  void* entry = nullptr;  // nullptr: pass-through, join() does nothing
};

class CarveoutStreamCache {
 public:
  explicit CarveoutStreamCache(std::unique_ptr<CarveoutStreamBackend> backend);
  ~CarveoutStreamCache();
  CarveoutStreamCache(const CarveoutStreamCache&) = delete;
  CarveoutStreamCache& operator=(const CarveoutStreamCache&) = delete;

  // Returns the stream a GEMM on `device` should run on to leave `carveout`
  // CUs free, ordered after the work already on `current`. carveout == 0
  // and graph capture pass through (stream == current, nothing enqueued).
  // `carveout` counts SMs (see CUTopology::cus_per_sm). Raises c10::Error
  // for carveout outside [0, SMs).
  CarveoutFork fork(
      c10::DeviceIndex device,
      int64_t carveout,
      CarveoutStream current);

  // Makes `fork.current` wait for the work enqueued on `fork.stream`.
  void join(const CarveoutFork& fork);

  // Number of (device, k) entries, i.e. masked streams created so far.
  size_t size() const;

 private:
  struct Entry {
    c10::DeviceIndex device = 0;
    CarveoutStream stream = nullptr;
    CarveoutEvent event = nullptr;
    // Held across each record+wait pair on `event` (see above).
    std::mutex event_mutex;
  };
  using Key = std::pair<c10::DeviceIndex, int64_t>;

  Entry& entry_for(c10::DeviceIndex device, int64_t carveout);

  std::unique_ptr<CarveoutStreamBackend> backend_;
  mutable std::mutex mutex_;  // guards entries_
  // std::map never moves its nodes, so an Entry keeps its address for
  // CarveoutFork::entry while other keys are added.
  std::map<Key, Entry> entries_;
};

// RAII form of fork/join for call sites:
//   CarveoutStreamScope scope(cache, device, k, current);
//   launch_gemm(..., scope.stream());
//   scope.join();  // or let the destructor join
class CarveoutStreamScope {
 public:
  CarveoutStreamScope(
      CarveoutStreamCache& cache,
      c10::DeviceIndex device,
      int64_t carveout,
      CarveoutStream current);
  ~CarveoutStreamScope();
  CarveoutStreamScope(const CarveoutStreamScope&) = delete;
  CarveoutStreamScope& operator=(const CarveoutStreamScope&) = delete;

  CarveoutStream stream() const {
    return fork_.stream;
  }
  // Joins now so errors raise here; the destructor then does nothing.
  void join();

 private:
  CarveoutStreamCache& cache_;
  CarveoutFork fork_;
  bool joined_ = false;
};

}  // namespace at::cuda
