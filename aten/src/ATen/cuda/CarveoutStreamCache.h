#pragma once

// Cache of restricted streams for the SM carveout.
//
// A GEMM whose kernels cannot size their grid from the SM budget runs on a
// stream that the hardware confines to part of the device: a CU-masked
// stream on ROCm (CUMask.h, ATen/hip/), a green-context stream on CUDA
// (GreenContextStreamCUDA.h).
//
// Key: (device, partition, caller stream). The partition is what the
// restriction enables (SMs of the green context, CUs of the mask), so two
// k that round to the same partition share an entry. The caller stream is
// in the key because a restricted stream is a queue: were it shared, the
// caller stream that forks second would wait for everything the first had
// queued before its fork (a collective, say), which is the overlap the
// carveout exists for.
//
// Lifetime: an entry (one stream, two events) is created on the first fork
// of its key and reused by every later fork of that key, from any thread.
// The cache keeps at most max_entries of them; making room destroys the
// least recently used one. That is safe: its caller stream already waits
// for its work (join), the runtimes free a stream or event only after the
// work queued before its destruction, and a fork still between fork() and
// join() holds its entry until the join. The cache destroys the rest.
//
// Ordering with the caller's stream, per GEMM:
//   fork: record(fork_event, current);   wait(restricted, fork_event)
//   join: record(join_event, restricted); wait(current, join_event)
// A wait orders against the record enqueued before it, so re-recording an
// event later is safe; each record+wait pair runs under the entry's lock so
// that two threads forking from the same caller stream cannot interleave
// their records and waits. Two events, because CUDA records an event only
// on a stream of the context that created it, and a green context's
// streams belong to their own context.
//
// Under graph capture fork() returns the current stream and enqueues
// nothing. On ROCm the CU mask belongs to the hardware queue behind a
// stream, and a graph records kernel nodes, not queues, so a captured GEMM
// would replay on every CU; on CUDA, replay inside a green context's
// partition is unverified. The library SM-count hints still apply to
// captured GEMMs, and a bad k still raises.
//
// The backend interface keeps this file free of HIP and CUDA, so CPU tests
// can drive the cache with a test double.

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace at::cuda {

// Opaque runtime handles (cudaStream_t / cudaEvent_t, hipStream_t /
// hipEvent_t).
using CarveoutStream = void*;
using CarveoutEvent = void*;

// The runtime operations the cache needs; one implementation per runtime.
class CarveoutStreamBackend {
 public:
  virtual ~CarveoutStreamBackend() = default;
  // The partition that leaves `carveout` SMs (as the runtime counts them)
  // free on `device`: the SMs or CUs a restricted stream enables, in the
  // backend's own unit. Raises a c10::Error naming k when the runtime cannot
  // honour it. Called under graph capture too, so capture does not hide a
  // bad k.
  virtual int64_t partition(c10::DeviceIndex device, int64_t carveout) = 0;
  // A new stream on `device` whose kernels run on that partition only.
  virtual CarveoutStream create_restricted_stream(
      c10::DeviceIndex device,
      int64_t partition) = 0;
  // An event that can be recorded on `owner`, a stream this backend created,
  // or on the device's ordinary streams when `owner` is nullptr.
  virtual CarveoutEvent create_event(
      c10::DeviceIndex device,
      CarveoutStream owner) = 0;
  virtual void record(CarveoutEvent event, CarveoutStream stream) = 0;
  virtual void wait(CarveoutStream stream, CarveoutEvent event) = 0;
  virtual bool is_capturing(CarveoutStream stream) = 0;
  // Called on eviction and from the cache's destructor, which must not
  // throw, possibly with work still queued (see "Lifetime"). Events go
  // before the stream they belong to.
  virtual void destroy_stream(
      c10::DeviceIndex device, CarveoutStream stream) noexcept = 0;
  virtual void destroy_event(
      c10::DeviceIndex device, CarveoutEvent event) noexcept = 0;
};

struct CarveoutStreamEntry;

// Result of fork(): the stream to launch on, and what join() needs.
struct CarveoutFork {
  CarveoutStream stream = nullptr;   // launch the GEMM here
  CarveoutStream current = nullptr;  // the caller's stream
  // Null: pass-through, join() does nothing. Keeps an evicted entry alive
  // until the join.
  std::shared_ptr<CarveoutStreamEntry> entry;
};

class CarveoutStreamCache {
 public:
  // Room for every caller stream of a training step (compute, side
  // streams, DualPipe's pair) times a few partitions on several devices;
  // each entry is one stream and two events.
  static constexpr size_t kDefaultMaxEntries = 64;

  explicit CarveoutStreamCache(
      std::unique_ptr<CarveoutStreamBackend> backend,
      size_t max_entries = kDefaultMaxEntries);
  ~CarveoutStreamCache();
  CarveoutStreamCache(const CarveoutStreamCache&) = delete;
  CarveoutStreamCache& operator=(const CarveoutStreamCache&) = delete;

  // Returns the stream a GEMM on `device` should run on to leave `carveout`
  // SMs free, ordered after the work already on `current` and after nothing
  // else. carveout == 0 and graph capture pass through (stream == current,
  // nothing enqueued). Raises the backend's c10::Error for a k it cannot
  // honour.
  CarveoutFork fork(
      c10::DeviceIndex device,
      int64_t carveout,
      CarveoutStream current);

  // Makes `fork.current` wait for the work enqueued on `fork.stream`.
  void join(const CarveoutFork& fork);

  // The restricted stream of (device, carveout > 0, current), created if
  // needed, without any ordering: for tests and diagnostics that launch on
  // it themselves. It stays valid until evicted (see "Lifetime").
  CarveoutStream restricted_stream(
      c10::DeviceIndex device,
      int64_t carveout,
      CarveoutStream current);

  // Number of entries held now (at most max_entries).
  size_t size() const;

 private:
  struct Key {
    c10::DeviceIndex device = 0;
    int64_t partition = 0;
    CarveoutStream caller = nullptr;
    bool operator==(const Key& other) const;
  };
  struct Slot {
    Key key;
    std::shared_ptr<CarveoutStreamEntry> entry;
    uint64_t last_use = 0;  // for least-recently-used eviction
  };

  std::shared_ptr<CarveoutStreamEntry> entry_for(
      c10::DeviceIndex device,
      int64_t carveout,
      CarveoutStream current);
  std::shared_ptr<CarveoutStreamEntry> create_entry(
      c10::DeviceIndex device,
      int64_t partition);
  std::shared_ptr<CarveoutStreamEntry> evict_least_recently_used();

  std::unique_ptr<CarveoutStreamBackend> backend_;
  const size_t max_entries_;
  mutable std::mutex mutex_;  // guards entries_ and clock_
  // A short list (max_entries), searched linearly: a lookup is a few
  // dozen compares, and eviction scans it for the oldest entry anyway.
  std::vector<Slot> entries_;
  uint64_t clock_ = 0;
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
