#pragma once

// Cache of restricted streams for the SM carveout.
//
// A GEMM whose kernels cannot size their grid from the SM budget runs on a
// stream that the hardware confines to SMs - k SMs: a CU-masked stream on
// ROCm (CUMask.h, ATen/hip/), a green-context stream on CUDA
// (GreenContextStreamCUDA.h). The cache owns one such stream and two events
// per (device, k), created on first use, reused by every later call and
// thread, and destroyed with the cache.
//
// Ordering with the caller's current stream, per GEMM:
//   fork: record(fork_event, current);   wait(restricted, fork_event)
//   join: record(join_event, restricted); wait(current, join_event)
// A wait orders against the record enqueued before it, so re-recording an
// event later is safe; each record+wait pair runs under the entry's lock so
// that two threads cannot interleave their records and waits. Two events,
// because CUDA records an event only on a stream of the context that created
// it, and a green context's streams belong to their own context.
//
// Under graph capture fork() returns the current stream and enqueues
// nothing. On ROCm the CU mask belongs to the hardware queue behind a
// stream, and a graph records kernel nodes, not queues, so a captured GEMM
// would replay on every CU; on CUDA, replay inside a green context's
// partition is unverified. The library SM-count hints still apply to
// captured GEMMs, and a bad k still raises.
//
// The backend interface keeps this file free of HIP and CUDA, so CPU tests
// can drive the cache with a test double. Each backend builds its
// restriction from k.

#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace at::cuda {

// Opaque runtime handles (cudaStream_t / cudaEvent_t, hipStream_t /
// hipEvent_t).
using CarveoutStream = void*;
using CarveoutEvent = void*;

// The runtime operations the cache needs; one implementation per runtime.
class CarveoutStreamBackend {
 public:
  virtual ~CarveoutStreamBackend() = default;
  // Raises a c10::Error naming k when `carveout` (in SMs, as the runtime
  // counts them) cannot be honoured on `device`. Called under graph capture
  // too, so capture does not hide a bad k.
  virtual void check_carveout(c10::DeviceIndex device, int64_t carveout) = 0;
  // A new stream on `device` whose kernels leave at least `carveout` SMs
  // free (0 < carveout; check_carveout's errors apply).
  virtual CarveoutStream create_restricted_stream(
      c10::DeviceIndex device,
      int64_t carveout) = 0;
  // An event that can be recorded on `owner`, a stream this backend created,
  // or on the device's ordinary streams when `owner` is nullptr.
  virtual CarveoutEvent create_event(
      c10::DeviceIndex device,
      CarveoutStream owner) = 0;
  virtual void record(CarveoutEvent event, CarveoutStream stream) = 0;
  virtual void wait(CarveoutStream stream, CarveoutEvent event) = 0;
  virtual bool is_capturing(CarveoutStream stream) = 0;
  // Called from the cache's destructor, which must not throw. Events go
  // before the stream they belong to.
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
  // SMs free, ordered after the work already on `current`. carveout == 0
  // and graph capture pass through (stream == current, nothing enqueued).
  // Raises the backend's c10::Error for a k it cannot honour.
  CarveoutFork fork(
      c10::DeviceIndex device,
      int64_t carveout,
      CarveoutStream current);

  // Makes `fork.current` wait for the work enqueued on `fork.stream`.
  void join(const CarveoutFork& fork);

  // The restricted stream of (device, carveout > 0), created if needed,
  // without any ordering: for tests and diagnostics that launch on it
  // themselves.
  CarveoutStream restricted_stream(c10::DeviceIndex device, int64_t carveout);

  // Number of (device, k) entries, i.e. restricted streams created so far.
  size_t size() const;

 private:
  struct Entry {
    c10::DeviceIndex device = 0;
    CarveoutStream stream = nullptr;
    CarveoutEvent fork_event = nullptr;  // recorded on callers' streams
    CarveoutEvent join_event = nullptr;  // recorded on `stream`
    // Held across each record+wait pair (see above).
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
  // Whether the GEMM runs on a restricted stream (false: pass-through, for
  // k == 0 or under graph capture).
  bool restricted() const {
    return fork_.entry != nullptr;
  }
  // Joins now so errors raise here; the destructor then does nothing.
  void join();

 private:
  CarveoutStreamCache& cache_;
  CarveoutFork fork_;
  bool joined_ = false;
};

}  // namespace at::cuda
