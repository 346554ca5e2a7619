#include <gtest/gtest.h>

#include <ATen/cuda/CarveoutStreamCache.h>
#include <ATen/cuda/SMCarveout.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

// The restricted-stream cache (ATen/cuda/CarveoutStreamCache.h) on the CPU:
// a counting double stands in for the runtime, so what only a GPU could show
// otherwise is checked here: one stream and two reused events per (device,
// partition, caller stream), fork/join ordering from many threads, the
// bound on entries, graph capture, and nothing leaked.

namespace {

using at::cuda::CarveoutEvent;
using at::cuda::CarveoutStream;
using at::cuda::CarveoutStreamBackend;
using at::cuda::CarveoutStreamCache;
using at::cuda::CarveoutStreamScope;

// The CUDA green-context rule on a 132-SM part with 8-SM partitions (the
// policy of SMCarveout.h): k = 1 to 4 all plan the same 128-SM partition,
// k = 125 leaves too few SMs.
int64_t green_partition(int64_t k) {
  return at::cuda::green_context_sm_count(132, k, 8, 8);
}

struct FakeStream {
  c10::DeviceIndex device = 0;
  int64_t partition = 0;  // 0 for the callers' own streams
  // The caller stream the first fork handed this stream to.
  std::atomic<CarveoutStream> caller{nullptr};
};

struct FakeEvent {
  c10::DeviceIndex device = 0;
  // The restricted stream whose context the event belongs to; nullptr: the
  // device's ordinary context (the callers' streams).
  CarveoutStream owner = nullptr;
};

// What the double saw; shared with the test, so it outlives the cache.
struct Log {
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
  // reuses an address that a caller check remembers.
  std::vector<std::unique_ptr<FakeStream>> destroyed;
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
  explicit CountingBackend(std::shared_ptr<Log> log) : log_(std::move(log)) {}

  int64_t partition(c10::DeviceIndex /*device*/, int64_t carveout) override {
    return green_partition(carveout);
  }

  CarveoutStream create_restricted_stream(
      c10::DeviceIndex device,
      int64_t partition) override {
    auto* stream = new FakeStream;
    stream->device = device;
    stream->partition = partition;
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
    const auto* fake_event = static_cast<const FakeEvent*>(event);
    const auto* fake_stream = static_cast<const FakeStream*>(stream);
    // Restricted streams live in their own context, callers' streams in
    // the device's: CUDA records an event only on its own context's streams.
    const bool same_context = fake_event->owner == nullptr
        ? fake_stream->partition == 0
        : fake_event->owner == stream;
    if (!same_context) {
      ++log_->ordering_violations;
    }
    std::lock_guard<std::mutex> lock(log_->mutex);
    Log::Record& last = log_->pending[event];
    if (last.pending) {
      ++log_->ordering_violations;
    }
    last = Log::Record{std::this_thread::get_id(), stream, true};
  }

  void wait(CarveoutStream stream, CarveoutEvent event) override {
    ++log_->waits;
    std::lock_guard<std::mutex> lock(log_->mutex);
    Log::Record& last = log_->pending[event];
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
  std::shared_ptr<Log> log_;
};

struct Scenario {
  int64_t num_threads = 1;
  int64_t calls_per_thread = 1;
  std::vector<int64_t> carveouts;  // thread t, call c: a rotating k
  int64_t num_devices = 1;
  bool capturing = false;  // every caller stream reports capture
  size_t max_entries = CarveoutStreamCache::kDefaultMaxEntries;
};

struct Counts {
  int64_t streams_created = 0;
  int64_t events_created = 0;
  int64_t records = 0;
  int64_t waits = 0;
  int64_t streams_destroyed = 0;
  int64_t events_destroyed = 0;
  int64_t cache_entries = 0;  // before the cache is destroyed
  int64_t forks = 0;
  int64_t pass_through = 0;  // forks that returned the caller's stream
  // Forks whose stream has the wrong device or partition, or was handed to
  // another caller stream before.
  int64_t wrong_stream = 0;
  int64_t ordering_violations = 0;
  int64_t peak_live_streams = 0;
};

c10::DeviceIndex device_of(int64_t thread, int64_t call, int64_t devices) {
  return static_cast<c10::DeviceIndex>((thread + call) % devices);
}

int64_t carveout_of(const Scenario& s, int64_t thread, int64_t call) {
  const auto n = static_cast<int64_t>(s.carveouts.size());
  return s.carveouts[(7 * thread + call) % n];
}

bool is_expected_stream(
    CarveoutStream stream,
    c10::DeviceIndex device,
    int64_t carveout,
    CarveoutStream caller) {
  auto* fake = static_cast<FakeStream*>(stream);
  CarveoutStream first_caller = nullptr;
  const bool first = fake->caller.compare_exchange_strong(first_caller, caller);
  return fake->device == device && fake->partition == green_partition(carveout) &&
      (first || first_caller == caller);
}

// Each thread forks, "launches" and joins calls_per_thread times from its
// own caller stream; the counts after the cache is gone.
Counts run(const Scenario& s) {
  auto log = std::make_shared<Log>();
  std::vector<FakeStream> callers(s.num_threads);
  if (s.capturing) {
    for (auto& caller : callers) {
      log->capturing.insert(&caller);
    }
  }
  std::vector<Counts> per_thread(s.num_threads);
  Counts counts;
  {
    CarveoutStreamCache cache(
        std::make_unique<CountingBackend>(log), s.max_entries);
    std::vector<std::thread> threads;
    std::exception_ptr error;
    std::mutex error_mutex;
    for (int64_t t = 0; t < s.num_threads; ++t) {
      threads.emplace_back([&, t] {
        try {
          Counts& mine = per_thread[t];
          CarveoutStream current = &callers[t];
          for (int64_t c = 0; c < s.calls_per_thread; ++c) {
            const auto device = device_of(t, c, s.num_devices);
            const int64_t k = carveout_of(s, t, c);
            CarveoutStreamScope scope(cache, device, k, current);
            ++mine.forks;
            if (scope.stream() == current) {
              ++mine.pass_through;
            } else if (!is_expected_stream(scope.stream(), device, k, current)) {
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
  for (const Counts& mine : per_thread) {
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

// The (device, partition, caller) keys a scenario touches (k > 0 only).
size_t keys_used(const Scenario& s) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> keys;
  for (int64_t t = 0; t < s.num_threads; ++t) {
    for (int64_t c = 0; c < s.calls_per_thread; ++c) {
      const int64_t k = carveout_of(s, t, c);
      if (k > 0) {
        keys.emplace(device_of(t, c, s.num_devices), green_partition(k), t);
      }
    }
  }
  return keys.size();
}

}  // namespace

TEST(CarveoutStreamCacheTest, CreatesEachEntryOnce) {
  for (const int64_t threads : {1, 4, 16}) {
    // k = 1 and 2 plan the same 128-SM partition as k = 4.
    Scenario s;
    s.num_threads = threads;
    s.calls_per_thread = 200;
    s.carveouts = {0, 1, 2, 4, 16, 32, 66};
    s.num_devices = 2;
    s.max_entries = 10000;  // more than the keys: nothing is evicted
    const Counts counts = run(s);
    const auto keys = static_cast<int64_t>(keys_used(s));
    const int64_t forked = counts.forks - counts.pass_through;
    EXPECT_EQ(counts.forks, threads * s.calls_per_thread);
    EXPECT_EQ(counts.cache_entries, keys) << threads << " threads";
    EXPECT_EQ(counts.streams_created, keys);
    // A fork event and a join event per entry, reused by every call.
    EXPECT_EQ(counts.events_created, 2 * keys);
    EXPECT_EQ(counts.records, 2 * forked);
    EXPECT_EQ(counts.waits, 2 * forked);
    EXPECT_EQ(counts.wrong_stream, 0);
    EXPECT_EQ(counts.ordering_violations, 0);
    EXPECT_EQ(counts.streams_destroyed, counts.streams_created);
    EXPECT_EQ(counts.events_destroyed, counts.events_created);
  }
}

TEST(CarveoutStreamCacheTest, CarveoutsOfOnePartitionShareAStream) {
  Scenario s;
  s.num_threads = 4;
  s.calls_per_thread = 40;
  s.carveouts = {1, 2, 3, 4};  // all 128 of 132 SMs
  const Counts counts = run(s);
  EXPECT_EQ(counts.streams_created, 4);  // one per caller stream
  EXPECT_EQ(counts.wrong_stream, 0);
}

TEST(CarveoutStreamCacheTest, NoCarveoutIsFree) {
  Scenario s;
  s.num_threads = 4;
  s.calls_per_thread = 50;
  s.carveouts = {0};
  const Counts counts = run(s);
  EXPECT_EQ(counts.pass_through, counts.forks);
  EXPECT_EQ(counts.streams_created, 0);
  EXPECT_EQ(counts.events_created, 0);
  EXPECT_EQ(counts.records, 0);
  EXPECT_EQ(counts.waits, 0);
}

// Documented choice (CarveoutStreamCache.h): under capture the GEMM stays on
// the capturing stream, and a bad k still raises.
TEST(CarveoutStreamCacheTest, GraphCapturePassesThroughAndChecksK) {
  Scenario s;
  s.num_threads = 4;
  s.calls_per_thread = 50;
  s.carveouts = {8, 16};
  s.num_devices = 2;
  s.capturing = true;
  const Counts counts = run(s);
  EXPECT_EQ(counts.pass_through, counts.forks);
  EXPECT_EQ(counts.streams_created, 0);
  EXPECT_EQ(counts.events_created, 0);
  EXPECT_EQ(counts.records, 0);
  EXPECT_EQ(counts.waits, 0);
  Scenario bad = s;
  bad.num_threads = 1;
  bad.calls_per_thread = 1;
  bad.carveouts = {125};
  EXPECT_THROW(run(bad), c10::Error);
}

TEST(CarveoutStreamCacheTest, TooFewSmsRaisesAndCachesNothing) {
  for (const int64_t k : {128, 132, -1}) {
    auto log = std::make_shared<Log>();
    CarveoutStreamCache cache(std::make_unique<CountingBackend>(log));
    FakeStream caller;
    EXPECT_THROW(cache.fork(0, k, &caller), c10::Error) << "k = " << k;
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(log->streams_created.load(), 0);
  }
}

TEST(CarveoutStreamCacheTest, EntriesAreBounded) {
  for (const size_t max_entries : {size_t{1}, size_t{3}, size_t{8}}) {
    // 8 caller streams x 2 devices x 4 partitions: 64 keys.
    Scenario s;
    s.num_threads = 8;
    s.calls_per_thread = 200;
    s.carveouts = {4, 8, 16, 33};
    s.num_devices = 2;
    s.max_entries = max_entries;
    const Counts counts = run(s);
    EXPECT_LE(counts.cache_entries, static_cast<int64_t>(max_entries));
    // An evicted entry in use by a fork lives until its join: at most one
    // per thread beyond the bound, plus the one just evicted.
    EXPECT_LE(counts.peak_live_streams,
              static_cast<int64_t>(max_entries) + s.num_threads + 1);
    EXPECT_GT(counts.streams_created, static_cast<int64_t>(max_entries));
    EXPECT_EQ(counts.streams_destroyed, counts.streams_created);
    EXPECT_EQ(counts.events_destroyed, counts.events_created);
    EXPECT_EQ(counts.events_created, 2 * counts.streams_created);
    EXPECT_EQ(counts.wrong_stream, 0);
    EXPECT_EQ(counts.ordering_violations, 0);
  }
}

TEST(CarveoutStreamCacheTest, DefaultBoundHoldsATrainingStep) {
  // 16 caller streams, each on 4 (device, partition) pairs: 64 keys, all
  // kept by the default bound.
  Scenario s;
  s.num_threads = 16;
  s.calls_per_thread = 100;
  s.carveouts = {4, 8, 16, 33};
  s.num_devices = 2;
  const Counts counts = run(s);
  EXPECT_EQ(counts.cache_entries, 64);
  EXPECT_EQ(counts.streams_created, 64);
  EXPECT_EQ(counts.ordering_violations, 0);
}

TEST(CarveoutStreamCacheTest, RestrictedStreamIsTheForkedOne) {
  auto log = std::make_shared<Log>();
  CarveoutStreamCache cache(std::make_unique<CountingBackend>(log));
  FakeStream caller;
  CarveoutStream stream = cache.restricted_stream(0, 16, &caller);
  EXPECT_EQ(static_cast<FakeStream*>(stream)->partition, 112);
  {
    CarveoutStreamScope scope(cache, 0, 16, &caller);
    EXPECT_TRUE(scope.restricted());
    EXPECT_EQ(scope.stream(), stream);
  }  // joins on destruction
  EXPECT_EQ(log->records.load(), 2);
  EXPECT_EQ(log->waits.load(), 2);
  EXPECT_EQ(log->ordering_violations.load(), 0);
  EXPECT_THROW(cache.restricted_stream(0, 0, &caller), c10::Error);
  CarveoutStreamScope none(cache, 0, 0, &caller);
  EXPECT_FALSE(none.restricted());
  EXPECT_EQ(none.stream(), static_cast<CarveoutStream>(&caller));
}

TEST(CarveoutStreamCacheTest, RejectsBadConstruction) {
  EXPECT_THROW(CarveoutStreamCache(nullptr), c10::Error);
  EXPECT_THROW(
      CarveoutStreamCache(
          std::make_unique<CountingBackend>(std::make_shared<Log>()), 0),
      c10::Error);
}

// ---------------------------------------------------------------------------
// Two caller streams on a double that models stream order
// ---------------------------------------------------------------------------

namespace {

// Work items are numbered as they are queued. A stream carries the items
// that must finish before its next one may start; an event carries its
// recording stream's set.
struct ModelStream {
  std::set<int64_t> after;
};

struct ModelEvent {
  std::set<int64_t> after;
};

class StreamModelBackend final : public CarveoutStreamBackend {
 public:
  int64_t partition(c10::DeviceIndex /*device*/, int64_t carveout) override {
    return green_partition(carveout);
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
};

// Queues work items and remembers every item each caller's work waited on.
class WorkLog {
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

}  // namespace

// Stream B queues a long collective and then a carveout GEMM; stream A's
// GEMMs must not wait for any of it, also when the two forks interleave and
// when both k plan the same partition (a shared restricted stream would
// order them).
TEST(CarveoutStreamCacheTest, TwoCallerStreamsDoNotOrderEachOther) {
  for (const auto& [k_a, k_b] :
       std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {1, 2}, {8, 16}}) {
    constexpr int kA = 0;
    constexpr int kB = 1;
    CarveoutStreamCache cache(std::make_unique<StreamModelBackend>());
    ModelStream caller_a;
    ModelStream caller_b;
    WorkLog log;
    auto gemm = [&](int caller, ModelStream& current, int64_t k) {
      CarveoutStreamScope scope(cache, 0, k, &current);
      log.queue(scope.stream(), caller);
      scope.join();
    };
    gemm(kA, caller_a, k_a);
    log.queue(&caller_b, kB);  // the collective
    gemm(kB, caller_b, k_b);
    gemm(kA, caller_a, k_a);
    {
      CarveoutStreamScope fork_a(cache, 0, k_a, &caller_a);
      log.queue(fork_a.stream(), kA);
      log.queue(&caller_b, kB);
      CarveoutStreamScope fork_b(cache, 0, k_b, &caller_b);
      log.queue(fork_b.stream(), kB);
      fork_a.join();
      fork_b.join();
    }
    log.queue(&caller_a, kA);  // A's next op after its join
    gemm(kB, caller_b, k_b);
    gemm(kA, caller_a, k_a);
    log.queue(&caller_b, kB);
    EXPECT_EQ(log.foreign_items(kA), 0) << "k_a = " << k_a << ", k_b = " << k_b;
    EXPECT_EQ(log.foreign_items(kB), 0) << "k_a = " << k_a << ", k_b = " << k_b;
  }
}
