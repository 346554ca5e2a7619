#pragma once

// CPU test doubles for the restricted-stream cache
// (ATen/cuda/CarveoutStreamCache.h), shared by the C++ tests and the Python
// tests' probes. They check what only a GPU could show otherwise:
// - run_carveout_stream_scenario: threads fork, "launch" and join through
//   one cache on a counting backend. Streams are created once per (device,
//   partition, caller stream), with two reused events per entry; entries
//   stay bounded; events are recorded only on streams of their own context;
//   graph capture passes through; nothing leaks.
// - run_two_caller_streams_scenario: a backend that models stream and event
//   order shows which work each of two caller streams had to wait for.
// The doubles do not know how a runtime restricts a stream: the caller gives
// the rule (CarveoutRestriction: the CUDA green-context partition or the ROCm
// CU mask), which also raises for a k the runtime cannot honour.

#include <ATen/cuda/CarveoutStreamCache.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace at::cuda::testing {

// How a runtime restricts a stream (the same on every fake device).
struct CarveoutRestriction {
  // k -> the partition it leaves (SMs or CUs enabled); raises c10::Error
  // for a k the runtime cannot honour.
  std::function<int64_t(int64_t)> partition;
  // partition -> what the runtime builds for it (mask words, SM count).
  std::function<std::vector<int64_t>(int64_t)> describe;
};

struct FakeStream {
  c10::DeviceIndex device = 0;
  int64_t partition = 0;  // 0 for the callers' own streams
  std::vector<int64_t> restriction;
  // The caller stream the first fork handed this stream to.
  std::atomic<CarveoutStream> caller{nullptr};
};

struct FakeEvent {
  c10::DeviceIndex device = 0;
  // The restricted stream whose context the event belongs to; nullptr: the
  // device's ordinary context (the callers' streams).
  CarveoutStream owner = nullptr;
};

// What the counting backend saw. Shared with the test, so it outlives the
// cache (which owns the backend and destroys it first).
struct FakeLog {
  std::atomic<int64_t> streams_created{0};
  std::atomic<int64_t> events_created{0};
  std::atomic<int64_t> records{0};
  std::atomic<int64_t> waits{0};
  std::atomic<int64_t> streams_destroyed{0};
  std::atomic<int64_t> events_destroyed{0};
  // A record on a stream of another context, a record nobody waited on, or
  // a wait that is not its own thread's next step after the record.
  std::atomic<int64_t> ordering_violations{0};
  std::atomic<int64_t> live_streams{0};
  std::atomic<int64_t> peak_live_streams{0};
  std::mutex mutex;  // guards pending and destroyed
  // Destroyed streams stay allocated until the log goes, so no new stream
  // reuses an address that a caller-stream check remembers.
  std::vector<std::unique_ptr<FakeStream>> destroyed;
  // The last unmatched record of an event: who recorded it, on what stream.
  struct Record {
    std::thread::id thread;
    CarveoutStream stream = nullptr;
    bool pending = false;
  };
  std::unordered_map<CarveoutEvent, Record> pending;
  std::unordered_set<CarveoutStream> capturing;  // read-only once started
};

class CountingBackend final : public CarveoutStreamBackend {
 public:
  CountingBackend(std::shared_ptr<FakeLog> log, CarveoutRestriction restriction)
      : log_(std::move(log)), restriction_(std::move(restriction)) {}

  int64_t partition(c10::DeviceIndex /*device*/, int64_t carveout) override {
    return restriction_.partition(carveout);
  }

  CarveoutStream create_restricted_stream(
      c10::DeviceIndex device,
      int64_t partition) override {
    auto* stream = new FakeStream;
    stream->device = device;
    stream->partition = partition;
    stream->restriction = restriction_.describe(partition);
    ++log_->streams_created;
    const int64_t live = ++log_->live_streams;
    int64_t peak = log_->peak_live_streams.load();
    while (live > peak &&
           !log_->peak_live_streams.compare_exchange_weak(peak, live)) {
    }
    return stream;
  }

  CarveoutEvent create_event(c10::DeviceIndex device, CarveoutStream owner)
      override {
    ++log_->events_created;
    return new FakeEvent{device, owner};
  }

  void record(CarveoutEvent event, CarveoutStream stream) override {
    ++log_->records;
    if (!same_context(event, stream)) {
      ++log_->ordering_violations;
    }
    std::lock_guard<std::mutex> lock(log_->mutex);
    FakeLog::Record& last = log_->pending[event];
    if (last.pending) {
      ++log_->ordering_violations;  // a record nobody waited on
    }
    last = FakeLog::Record{std::this_thread::get_id(), stream, true};
  }

  void wait(CarveoutStream stream, CarveoutEvent event) override {
    ++log_->waits;
    std::lock_guard<std::mutex> lock(log_->mutex);
    FakeLog::Record& last = log_->pending[event];
    if (!last.pending || last.thread != std::this_thread::get_id() ||
        last.stream == stream) {
      ++log_->ordering_violations;
    }
    last.pending = false;
  }

  bool is_capturing(CarveoutStream stream) override {
    return log_->capturing.count(stream) > 0;
  }

  void destroy_stream(
      c10::DeviceIndex /*device*/,
      CarveoutStream stream) noexcept override {
    ++log_->streams_destroyed;
    --log_->live_streams;
    std::lock_guard<std::mutex> lock(log_->mutex);
    log_->destroyed.emplace_back(static_cast<FakeStream*>(stream));
  }

  void destroy_event(
      c10::DeviceIndex /*device*/,
      CarveoutEvent event) noexcept override {
    ++log_->events_destroyed;
    delete static_cast<FakeEvent*>(event);
  }

 private:
  // Restricted streams live in their own context (a green context on CUDA);
  // the callers' streams, never restricted, in the device's. CUDA records
  // an event only on its own context's streams.
  static bool same_context(CarveoutEvent event, CarveoutStream stream) {
    const auto* fake_event = static_cast<const FakeEvent*>(event);
    const auto* fake_stream = static_cast<const FakeStream*>(stream);
    return fake_event->owner == nullptr ? fake_stream->partition == 0
                                        : fake_event->owner == stream;
  }

  std::shared_ptr<FakeLog> log_;
  CarveoutRestriction restriction_;
};

struct CarveoutScenario {
  int64_t num_threads = 1;
  int64_t calls_per_thread = 1;
  std::vector<int64_t> carveouts;  // thread t, call c uses a rotating k
  int64_t num_devices = 1;
  bool capturing = false;  // every caller stream reports capture
  // The cache's bound; 0: CarveoutStreamCache::kDefaultMaxEntries.
  int64_t max_entries = 0;
  CarveoutRestriction restriction;
};

// What a scenario observed.
struct CarveoutScenarioCounts {
  int64_t streams_created = 0;
  int64_t events_created = 0;
  int64_t records = 0;
  int64_t waits = 0;
  int64_t streams_destroyed = 0;
  int64_t events_destroyed = 0;
  int64_t cache_entries = 0;  // cache size before it was destroyed
  int64_t forks = 0;
  int64_t pass_through = 0;  // forks that returned the caller's stream
  // Forks whose stream has the wrong device, partition or restriction for
  // their (device, k), or was handed to another caller stream before.
  int64_t wrong_stream = 0;
  int64_t ordering_violations = 0;  // see FakeLog
  int64_t peak_live_streams = 0;  // most restricted streams alive at once
};

// Thread t's call c: its device and its k.
inline c10::DeviceIndex scenario_device(
    const CarveoutScenario& s, int64_t thread, int64_t call) {
  return static_cast<c10::DeviceIndex>((thread + call) % s.num_devices);
}

inline int64_t scenario_carveout(
    const CarveoutScenario& s, int64_t thread, int64_t call) {
  const auto n = static_cast<int64_t>(s.carveouts.size());
  return s.carveouts[(7 * thread + call) % n];
}

// Right device, partition and restriction, and never handed to two caller
// streams.
inline bool is_expected_stream(
    CarveoutStream stream,
    c10::DeviceIndex device,
    int64_t carveout,
    CarveoutStream caller,
    const CarveoutRestriction& restriction) {
  auto* fake = static_cast<FakeStream*>(stream);
  const int64_t partition = restriction.partition(carveout);
  CarveoutStream first_caller = nullptr;
  const bool first = fake->caller.compare_exchange_strong(first_caller, caller);
  return fake->device == device && fake->partition == partition &&
      fake->restriction == restriction.describe(partition) &&
      (first || first_caller == caller);
}

inline void check_scenario(const CarveoutScenario& s) {
  TORCH_CHECK(s.num_threads >= 1,
              "carveout scenario: num_threads must be >= 1, got ",
              s.num_threads);
  TORCH_CHECK(s.calls_per_thread >= 0,
              "carveout scenario: calls_per_thread must be >= 0, got ",
              s.calls_per_thread);
  TORCH_CHECK(!s.carveouts.empty(),
              "carveout scenario: carveouts must not be empty");
  TORCH_CHECK(s.num_devices >= 1,
              "carveout scenario: num_devices must be >= 1, got ",
              s.num_devices);
  TORCH_CHECK(static_cast<bool>(s.restriction.partition) &&
                  static_cast<bool>(s.restriction.describe),
              "carveout scenario: restriction must be set");
  TORCH_CHECK(s.max_entries >= 0,
              "carveout scenario: max_entries must be >= 0, got ",
              s.max_entries);
}

// Each thread forks, "launches" and joins calls_per_thread times from its
// own caller stream; the counts after the cache is gone.
inline CarveoutScenarioCounts run_carveout_stream_scenario(
    const CarveoutScenario& s) {
  check_scenario(s);
  auto log = std::make_shared<FakeLog>();
  std::vector<FakeStream> callers(s.num_threads);
  if (s.capturing) {
    for (auto& caller : callers) {
      log->capturing.insert(&caller);
    }
  }
  std::vector<CarveoutScenarioCounts> per_thread(s.num_threads);
  CarveoutScenarioCounts counts;
  {
    const size_t max_entries = s.max_entries > 0
        ? static_cast<size_t>(s.max_entries)
        : CarveoutStreamCache::kDefaultMaxEntries;
    CarveoutStreamCache cache(
        std::make_unique<CountingBackend>(log, s.restriction), max_entries);
    std::vector<std::thread> threads;
    std::exception_ptr error;
    std::mutex error_mutex;
    for (int64_t t = 0; t < s.num_threads; ++t) {
      threads.emplace_back([&, t] {
        try {
          CarveoutScenarioCounts& mine = per_thread[t];
          CarveoutStream current = &callers[t];
          for (int64_t c = 0; c < s.calls_per_thread; ++c) {
            const c10::DeviceIndex device = scenario_device(s, t, c);
            const int64_t k = scenario_carveout(s, t, c);
            CarveoutStreamScope scope(cache, device, k, current);
            ++mine.forks;
            if (scope.stream() == current) {
              ++mine.pass_through;
            } else if (!is_expected_stream(scope.stream(), device, k,
                                           current, s.restriction)) {
              ++mine.wrong_stream;
            }
            scope.join();
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          error = std::current_exception();
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    if (error) {
      std::rethrow_exception(error);
    }
    counts.cache_entries = static_cast<int64_t>(cache.size());
  }  // the cache destroys its streams and events here
  for (const CarveoutScenarioCounts& mine : per_thread) {
    counts.forks += mine.forks;
    counts.pass_through += mine.pass_through;
    counts.wrong_stream += mine.wrong_stream;
  }
  counts.streams_created = log->streams_created;
  counts.events_created = log->events_created;
  counts.records = log->records;
  counts.waits = log->waits;
  counts.streams_destroyed = log->streams_destroyed;
  counts.events_destroyed = log->events_destroyed;
  counts.ordering_violations = log->ordering_violations;
  counts.peak_live_streams = log->peak_live_streams;
  return counts;
}

// ---------------------------------------------------------------------------
// A backend that models stream and event order, for the two-caller scenario
// ---------------------------------------------------------------------------

// Work items are numbered in the order they are queued. A stream carries the
// items that must finish before the next one queued on it may start; the set
// is transitively closed, because items only ever join it through a stream's
// own queue or through an event recorded on another stream.
struct ModelStream {
  std::set<int64_t> after;
};

struct ModelEvent {
  std::set<int64_t> after;  // the recording stream's set at the record
};

class StreamModelBackend final : public CarveoutStreamBackend {
 public:
  explicit StreamModelBackend(std::function<int64_t(int64_t)> partition)
      : partition_(std::move(partition)) {}

  int64_t partition(c10::DeviceIndex /*device*/, int64_t carveout) override {
    return partition_(carveout);
  }
  CarveoutStream create_restricted_stream(
      c10::DeviceIndex /*device*/,
      int64_t /*partition*/) override {
    return new ModelStream;
  }
  CarveoutEvent create_event(
      c10::DeviceIndex /*device*/,
      CarveoutStream /*owner*/) override {
    return new ModelEvent;
  }
  void record(CarveoutEvent event, CarveoutStream stream) override {
    static_cast<ModelEvent*>(event)->after =
        static_cast<ModelStream*>(stream)->after;
  }
  void wait(CarveoutStream stream, CarveoutEvent event) override {
    const auto& after = static_cast<ModelEvent*>(event)->after;
    static_cast<ModelStream*>(stream)->after.insert(after.begin(), after.end());
  }
  bool is_capturing(CarveoutStream /*stream*/) override {
    return false;
  }
  void destroy_stream(
      c10::DeviceIndex /*device*/,
      CarveoutStream stream) noexcept override {
    delete static_cast<ModelStream*>(stream);
  }
  void destroy_event(
      c10::DeviceIndex /*device*/,
      CarveoutEvent event) noexcept override {
    delete static_cast<ModelEvent*>(event);
  }

 private:
  std::function<int64_t(int64_t)> partition_;
};

// Queues work items of two callers (0 and 1) and remembers, per caller,
// every item its work had to wait for.
class TwoCallerWorkLog {
 public:
  void queue(CarveoutStream stream, int caller) {
    auto& after = static_cast<ModelStream*>(stream)->after;
    waited_on_[caller].insert(after.begin(), after.end());
    const auto item = static_cast<int64_t>(caller_of_.size());
    caller_of_.push_back(caller);
    after.insert(item);
  }

  // Items of the other caller that `caller`'s work waited for.
  int64_t foreign_items(int caller) const {
    int64_t count = 0;
    for (const int64_t item : waited_on_[caller]) {
      count += caller_of_[item] != caller ? 1 : 0;
    }
    return count;
  }

 private:
  std::vector<int> caller_of_;
  std::set<int64_t> waited_on_[2];
};

// Two caller streams, A and B, drive one cache: B queues long work (a
// collective) before its GEMMs, work is queued between each fork and its
// join, and some calls interleave. A uses carveout_a, B carveout_b. Returns
// {B's items that A's work waited for, A's items that B's work waited for}:
// both 0 when neither caller stream orders the other through a restricted
// stream.
inline std::vector<int64_t> run_two_caller_streams_scenario(
    int64_t carveout_a,
    int64_t carveout_b,
    std::function<int64_t(int64_t)> partition) {
  constexpr int kA = 0;
  constexpr int kB = 1;
  constexpr c10::DeviceIndex kDevice = 0;
  CarveoutStreamCache cache(
      std::make_unique<StreamModelBackend>(std::move(partition)));
  ModelStream caller_a;
  ModelStream caller_b;
  TwoCallerWorkLog log;
  // One carveout GEMM of `caller`: fork, queue the GEMM, join.
  auto gemm = [&](int caller, ModelStream& current, int64_t k) {
    CarveoutStreamScope scope(cache, kDevice, k, &current);
    log.queue(scope.stream(), caller);
    scope.join();
  };
  gemm(kA, caller_a, carveout_a);
  log.queue(&caller_b, kB);  // the collective
  gemm(kB, caller_b, carveout_b);
  gemm(kA, caller_a, carveout_a);
  {
    // Both forked at once: B's collective and GEMM queued while A's GEMM
    // is between its fork and join.
    CarveoutStreamScope fork_a(cache, kDevice, carveout_a, &caller_a);
    log.queue(fork_a.stream(), kA);
    log.queue(&caller_b, kB);
    CarveoutStreamScope fork_b(cache, kDevice, carveout_b, &caller_b);
    log.queue(fork_b.stream(), kB);
    fork_a.join();
    fork_b.join();
  }
  log.queue(&caller_a, kA);  // A's next op after its join
  gemm(kB, caller_b, carveout_b);
  gemm(kA, caller_a, carveout_a);
  log.queue(&caller_b, kB);
  return {log.foreign_items(kA), log.foreign_items(kB)};
}

}  // namespace at::cuda::testing
