// Counting test double for CarveoutStreamBackend and the scenario runner.

#include "FakeCarveoutStreamBackend.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace overlap_ops::testing {

using at::cuda::CarveoutEvent;
using at::cuda::CarveoutStream;
using at::cuda::CarveoutStreamBackend;
using at::cuda::CarveoutStreamCache;
using at::cuda::CarveoutStreamScope;

namespace {

struct FakeStream {
  c10::DeviceIndex device = 0;
  int64_t partition = 0;  // 0 for the callers' current streams
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

// The last unmatched record of an event: who recorded it, on what stream.
struct PendingRecord {
  std::thread::id thread;
  CarveoutStream stream = nullptr;
  bool pending = false;
};

// Shared with the scenario so the counts outlive the cache (which owns the
// backend and destroys it first).
struct FakeLog {
  std::atomic<int64_t> streams_created{0};
  std::atomic<int64_t> events_created{0};
  std::atomic<int64_t> records{0};
  std::atomic<int64_t> waits{0};
  std::atomic<int64_t> streams_destroyed{0};
  std::atomic<int64_t> events_destroyed{0};
  std::atomic<int64_t> ordering_violations{0};
  std::atomic<int64_t> live_streams{0};
  std::atomic<int64_t> peak_live_streams{0};
  std::mutex mutex;  // guards pending and destroyed
  // Destroyed streams stay allocated until the log goes, so no new stream
  // reuses an address that a caller-stream check remembers.
  std::vector<std::unique_ptr<FakeStream>> destroyed;
  std::unordered_map<CarveoutEvent, PendingRecord> pending;
  std::unordered_set<CarveoutStream> capturing;  // read-only once started
};

class FakeCarveoutStreamBackend final : public CarveoutStreamBackend {
 public:
  FakeCarveoutStreamBackend(
      std::shared_ptr<FakeLog> log,
      CarveoutRestriction restriction)
      : log_(std::move(log)), restriction_(std::move(restriction)) {}

  int64_t partition(c10::DeviceIndex /*device*/, int64_t carveout)
      override {
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
    PendingRecord& last = log_->pending[event];
    if (last.pending) {
      ++log_->ordering_violations;  // a record nobody waited on
    }
    last = PendingRecord{std::this_thread::get_id(), stream, true};
  }

  void wait(CarveoutStream stream, CarveoutEvent event) override {
    ++log_->waits;
    std::lock_guard<std::mutex> lock(log_->mutex);
    PendingRecord& last = log_->pending[event];
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
      c10::DeviceIndex /*device*/, CarveoutStream stream) noexcept override {
    ++log_->streams_destroyed;
    --log_->live_streams;
    std::lock_guard<std::mutex> lock(log_->mutex);
    log_->destroyed.emplace_back(static_cast<FakeStream*>(stream));
  }

  void destroy_event(
      c10::DeviceIndex /*device*/, CarveoutEvent event) noexcept override {
    ++log_->events_destroyed;
    delete static_cast<FakeEvent*>(event);
  }

 private:
  // Restricted streams live in their own context (a green context on CUDA);
  // the callers' streams, never restricted, in the device's.
  static bool same_context(CarveoutEvent event, CarveoutStream stream) {
    const auto* fake_event = static_cast<const FakeEvent*>(event);
    const auto* fake_stream = static_cast<const FakeStream*>(stream);
    if (fake_event->owner == nullptr) {
      return fake_stream->partition == 0;
    }
    return fake_event->owner == stream;
  }

  std::shared_ptr<FakeLog> log_;
  CarveoutRestriction restriction_;
};

struct ThreadTally {
  int64_t forks = 0;
  int64_t pass_through = 0;
  int64_t wrong_stream = 0;
};

// Right device and partition, and never handed to two caller streams.
bool is_expected_stream(
    CarveoutStream stream,
    c10::DeviceIndex device,
    int64_t carveout,
    CarveoutStream current,
    const CarveoutRestriction& restriction) {
  auto* fake = static_cast<FakeStream*>(stream);
  const int64_t partition = restriction.partition(carveout);
  CarveoutStream caller = nullptr;
  const bool first = fake->caller.compare_exchange_strong(caller, current);
  return fake->device == device && fake->partition == partition &&
      fake->restriction == restriction.describe(partition) &&
      (first || caller == current);
}

// One worker: fork, "launch", join, with a rotating (device, k).
void run_worker(
    CarveoutStreamCache& cache,
    const CarveoutScenario& scenario,
    int64_t thread_index,
    CarveoutStream current,
    ThreadTally& tally) {
  const auto num_k = static_cast<int64_t>(scenario.carveouts.size());
  for (int64_t call = 0; call < scenario.calls_per_thread; ++call) {
    const auto device = static_cast<c10::DeviceIndex>(
        (thread_index + call) % scenario.num_devices);
    const int64_t k = scenario.carveouts[(thread_index * 7 + call) % num_k];
    CarveoutStreamScope scope(cache, device, k, current);
    ++tally.forks;
    if (scope.stream() == current) {
      ++tally.pass_through;
    } else if (!is_expected_stream(
                   scope.stream(), device, k, current,
                   scenario.restriction)) {
      ++tally.wrong_stream;
    }
    scope.join();
  }
}

void check_scenario(const CarveoutScenario& scenario) {
  TORCH_CHECK(
      scenario.num_threads >= 1,
      "carveout scenario: num_threads must be >= 1, got ",
      scenario.num_threads);
  TORCH_CHECK(
      scenario.calls_per_thread >= 0,
      "carveout scenario: calls_per_thread must be >= 0, got ",
      scenario.calls_per_thread);
  TORCH_CHECK(
      !scenario.carveouts.empty(),
      "carveout scenario: carveouts must not be empty");
  TORCH_CHECK(
      scenario.num_devices >= 1,
      "carveout scenario: num_devices must be >= 1, got ",
      scenario.num_devices);
  TORCH_CHECK(
      static_cast<bool>(scenario.restriction.partition) &&
          static_cast<bool>(scenario.restriction.describe),
      "carveout scenario: restriction must be set");
  TORCH_CHECK(
      scenario.max_entries >= 0,
      "carveout scenario: max_entries must be >= 0, got ",
      scenario.max_entries);
}


// ---------------------------------------------------------------------------
// A double that models stream and event semantics, for the two-caller test
// ---------------------------------------------------------------------------

// Work items are numbered in the order they are queued. A stream carries the
// items that must finish before the next one queued on it may start; the
// set is transitively closed, because items only ever join it through a
// stream's own queue or through an event recorded on another stream.
struct ModelStream {
  std::set<int64_t> after;
};

struct ModelEvent {
  std::set<int64_t> after;  // the recording stream's set at the record
};

class StreamModelBackend final : public CarveoutStreamBackend {
 public:
  explicit StreamModelBackend(CarveoutRestriction restriction)
      : restriction_(std::move(restriction)) {}

  int64_t partition(c10::DeviceIndex /*device*/, int64_t carveout)
      override {
    return restriction_.partition(carveout);
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
    static_cast<ModelStream*>(stream)->after.insert(after.begin(),
                                                    after.end());
  }

  bool is_capturing(CarveoutStream /*stream*/) override {
    return false;
  }

  void destroy_stream(
      c10::DeviceIndex /*device*/, CarveoutStream stream) noexcept override {
    delete static_cast<ModelStream*>(stream);
  }

  void destroy_event(
      c10::DeviceIndex /*device*/, CarveoutEvent event) noexcept override {
    delete static_cast<ModelEvent*>(event);
  }

 private:
  CarveoutRestriction restriction_;
};

// Queues work items and remembers, per caller, every item its work had to
// wait for.
class TwoCallerWorkLog {
 public:
  void queue(CarveoutStream stream, int64_t caller) {
    auto& after = static_cast<ModelStream*>(stream)->after;
    waited_on_[caller].insert(after.begin(), after.end());
    const auto item = static_cast<int64_t>(caller_of_.size());
    caller_of_.push_back(caller);
    after.insert(item);
  }

  // Items of the other caller that `caller`'s work waited for.
  int64_t foreign_items(int64_t caller) const {
    int64_t count = 0;
    for (const int64_t item : waited_on_[caller]) {
      count += caller_of_[item] != caller ? 1 : 0;
    }
    return count;
  }

 private:
  std::vector<int64_t> caller_of_;
  std::set<int64_t> waited_on_[2];
};

}  // namespace

CarveoutScenarioCounts run_carveout_stream_scenario(
    const CarveoutScenario& scenario) {
  check_scenario(scenario);
  auto log = std::make_shared<FakeLog>();
  // The callers' current streams: one per thread, never restricted.
  std::vector<FakeStream> current(scenario.num_threads);
  if (scenario.capturing) {
    for (auto& stream : current) {
      log->capturing.insert(&stream);
    }
  }
  std::vector<ThreadTally> tallies(scenario.num_threads);
  CarveoutScenarioCounts counts;
  {
    const size_t max_entries = scenario.max_entries > 0
        ? static_cast<size_t>(scenario.max_entries)
        : CarveoutStreamCache::kDefaultMaxEntries;
    CarveoutStreamCache cache(
        std::make_unique<FakeCarveoutStreamBackend>(
            log, scenario.restriction),
        max_entries);
    std::vector<std::thread> threads;
    std::exception_ptr error;
    std::mutex error_mutex;
    for (int64_t t = 0; t < scenario.num_threads; ++t) {
      threads.emplace_back([&, t] {
        try {
          run_worker(cache, scenario, t, &current[t], tallies[t]);
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
  for (const ThreadTally& tally : tallies) {
    counts.forks += tally.forks;
    counts.pass_through += tally.pass_through;
    counts.wrong_stream += tally.wrong_stream;
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

std::vector<std::string> carveout_scenario_field_names() {
  return {"streams_created", "events_created", "records", "waits",
          "streams_destroyed", "events_destroyed", "cache_entries", "forks",
          "pass_through", "wrong_stream", "ordering_violations",
          "peak_live_streams"};
}

std::vector<int64_t> carveout_scenario_counts_as_list(
    const CarveoutScenarioCounts& counts) {
  return {counts.streams_created, counts.events_created, counts.records,
          counts.waits, counts.streams_destroyed, counts.events_destroyed,
          counts.cache_entries, counts.forks, counts.pass_through,
          counts.wrong_stream, counts.ordering_violations,
          counts.peak_live_streams};
}

std::vector<int64_t> run_two_caller_streams_scenario(
    int64_t carveout_a,
    int64_t carveout_b,
    const CarveoutRestriction& restriction) {
  constexpr int64_t kA = 0;
  constexpr int64_t kB = 1;
  constexpr c10::DeviceIndex kDevice = 0;
  CarveoutStreamCache cache(std::make_unique<StreamModelBackend>(restriction));
  ModelStream caller_a;
  ModelStream caller_b;
  TwoCallerWorkLog log;
  // One carveout GEMM of `caller`: fork, queue the GEMM, join.
  auto gemm = [&](int64_t caller, ModelStream& current, int64_t k) {
    CarveoutStreamScope scope(cache, kDevice, k, &current);
    log.queue(scope.stream(), caller);
    scope.join();
  };

  gemm(kA, caller_a, carveout_a);
  // B waits on a collective, then runs a GEMM.
  log.queue(&caller_b, kB);
  gemm(kB, caller_b, carveout_b);
  gemm(kA, caller_a, carveout_a);

  // Interleaved: both forked at once, B's collective and GEMM queued while
  // A's GEMM is between its fork and join.
  CarveoutStreamScope fork_a(cache, kDevice, carveout_a, &caller_a);
  log.queue(fork_a.stream(), kA);
  log.queue(&caller_b, kB);
  CarveoutStreamScope fork_b(cache, kDevice, carveout_b, &caller_b);
  log.queue(fork_b.stream(), kB);
  fork_a.join();
  fork_b.join();

  log.queue(&caller_a, kA);  // A's next op after its join
  gemm(kB, caller_b, carveout_b);
  gemm(kA, caller_a, carveout_a);
  log.queue(&caller_b, kB);
  return {log.foreign_items(kA), log.foreign_items(kB)};
}

}  // namespace overlap_ops::testing
