#include <gtest/gtest.h>

#include <ATen/cuda/CarveoutStreamCache.h>
#include <ATen/cuda/SMCarveout.h>
#include <ATen/test/carveout_stream_fakes.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

// The restricted-stream cache (ATen/cuda/CarveoutStreamCache.h) on the CPU:
// a counting double stands in for the runtime, so what only a GPU could show
// otherwise is checked here: one stream and two reused events per (device,
// partition, caller stream), fork/join ordering from many threads, the
// bound on entries, graph capture, and nothing leaked.

namespace {

using at::cuda::CarveoutStream;
using at::cuda::CarveoutStreamCache;
using at::cuda::CarveoutStreamScope;

// The CUDA green-context rule on a 132-SM part with 8-SM partitions (the
// policy of SMCarveout.h): k = 1 to 4 all plan the same 128-SM partition,
// k = 125 leaves too few SMs.
int64_t green_partition(int64_t k) {
  return at::cuda::green_context_sm_count(132, k, 8, 8);
}

using at::cuda::testing::CarveoutRestriction;
using at::cuda::testing::CarveoutScenario;
using at::cuda::testing::CarveoutScenarioCounts;
using at::cuda::testing::CountingBackend;
using at::cuda::testing::FakeLog;
using at::cuda::testing::FakeStream;
using at::cuda::testing::run_carveout_stream_scenario;
using at::cuda::testing::scenario_carveout;
using at::cuda::testing::scenario_device;

// The green-context rule as the doubles take it: a restricted stream holds
// its partition's SM count.
CarveoutRestriction green_restriction() {
  return {green_partition,
          [](int64_t partition) { return std::vector<int64_t>{partition}; }};
}

CarveoutScenario green_scenario() {
  CarveoutScenario s;
  s.restriction = green_restriction();
  return s;
}

// The (device, partition, caller) keys a scenario touches (k > 0 only).
size_t keys_used(const CarveoutScenario& s) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> keys;
  for (int64_t t = 0; t < s.num_threads; ++t) {
    for (int64_t c = 0; c < s.calls_per_thread; ++c) {
      const int64_t k = scenario_carveout(s, t, c);
      if (k > 0) {
        keys.emplace(scenario_device(s, t, c), green_partition(k), t);
      }
    }
  }
  return keys.size();
}

}  // namespace

TEST(CarveoutStreamCacheTest, CreatesEachEntryOnce) {
  for (const int64_t threads : {1, 4, 16}) {
    // k = 1 and 2 plan the same 128-SM partition as k = 4.
    CarveoutScenario s = green_scenario();
    s.num_threads = threads;
    s.calls_per_thread = 200;
    s.carveouts = {0, 1, 2, 4, 16, 32, 66};
    s.num_devices = 2;
    s.max_entries = 10000;  // more than the keys: nothing is evicted
    const CarveoutScenarioCounts counts = run_carveout_stream_scenario(s);
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
  CarveoutScenario s = green_scenario();
  s.num_threads = 4;
  s.calls_per_thread = 40;
  s.carveouts = {1, 2, 3, 4};  // all 128 of 132 SMs
  const CarveoutScenarioCounts counts = run_carveout_stream_scenario(s);
  EXPECT_EQ(counts.streams_created, 4);  // one per caller stream
  EXPECT_EQ(counts.wrong_stream, 0);
}

TEST(CarveoutStreamCacheTest, NoCarveoutIsFree) {
  CarveoutScenario s = green_scenario();
  s.num_threads = 4;
  s.calls_per_thread = 50;
  s.carveouts = {0};
  const CarveoutScenarioCounts counts = run_carveout_stream_scenario(s);
  EXPECT_EQ(counts.pass_through, counts.forks);
  EXPECT_EQ(counts.streams_created, 0);
  EXPECT_EQ(counts.events_created, 0);
  EXPECT_EQ(counts.records, 0);
  EXPECT_EQ(counts.waits, 0);
}

// Documented choice (CarveoutStreamCache.h): under capture the GEMM stays on
// the capturing stream, and a bad k still raises.
TEST(CarveoutStreamCacheTest, GraphCapturePassesThroughAndChecksK) {
  CarveoutScenario s = green_scenario();
  s.num_threads = 4;
  s.calls_per_thread = 50;
  s.carveouts = {8, 16};
  s.num_devices = 2;
  s.capturing = true;
  const CarveoutScenarioCounts counts = run_carveout_stream_scenario(s);
  EXPECT_EQ(counts.pass_through, counts.forks);
  EXPECT_EQ(counts.streams_created, 0);
  EXPECT_EQ(counts.events_created, 0);
  EXPECT_EQ(counts.records, 0);
  EXPECT_EQ(counts.waits, 0);
  CarveoutScenario bad = s;
  bad.num_threads = 1;
  bad.calls_per_thread = 1;
  bad.carveouts = {125};
  EXPECT_THROW(run_carveout_stream_scenario(bad), c10::Error);
}

TEST(CarveoutStreamCacheTest, TooFewSmsRaisesAndCachesNothing) {
  for (const int64_t k : {128, 132, -1}) {
    auto log = std::make_shared<FakeLog>();
    CarveoutStreamCache cache(
        std::make_unique<CountingBackend>(log, green_restriction()));
    FakeStream caller;
    EXPECT_THROW(cache.fork(0, k, &caller), c10::Error) << "k = " << k;
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(log->streams_created.load(), 0);
  }
}

TEST(CarveoutStreamCacheTest, EntriesAreBounded) {
  for (const size_t max_entries : {size_t{1}, size_t{3}, size_t{8}}) {
    // 8 caller streams x 2 devices x 4 partitions: 64 keys.
    CarveoutScenario s = green_scenario();
    s.num_threads = 8;
    s.calls_per_thread = 200;
    s.carveouts = {4, 8, 16, 33};
    s.num_devices = 2;
    s.max_entries = static_cast<int64_t>(max_entries);
    const CarveoutScenarioCounts counts = run_carveout_stream_scenario(s);
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
  CarveoutScenario s = green_scenario();
  s.num_threads = 16;
  s.calls_per_thread = 100;
  s.carveouts = {4, 8, 16, 33};
  s.num_devices = 2;
  const CarveoutScenarioCounts counts = run_carveout_stream_scenario(s);
  EXPECT_EQ(counts.cache_entries, 64);
  EXPECT_EQ(counts.streams_created, 64);
  EXPECT_EQ(counts.ordering_violations, 0);
}

TEST(CarveoutStreamCacheTest, RestrictedStreamIsTheForkedOne) {
  auto log = std::make_shared<FakeLog>();
  CarveoutStreamCache cache(
      std::make_unique<CountingBackend>(log, green_restriction()));
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
          std::make_unique<CountingBackend>(
              std::make_shared<FakeLog>(), green_restriction()),
          0),
      c10::Error);
}

// Stream B queues a long collective and then a carveout GEMM; stream A's
// GEMMs must not wait for any of it, also when the two forks interleave and
// when both k plan the same partition (a shared restricted stream would
// order them).
TEST(CarveoutStreamCacheTest, TwoCallerStreamsDoNotOrderEachOther) {
  for (const auto& [k_a, k_b] :
       std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {1, 2}, {8, 16}}) {
    const std::vector<int64_t> waited =
        at::cuda::testing::run_two_caller_streams_scenario(
            k_a, k_b, green_partition);
    EXPECT_EQ(waited, (std::vector<int64_t>{0, 0}))
        << "k_a = " << k_a << ", k_b = " << k_b
        << " (B items A waited on, A items B waited on)";
  }
}
