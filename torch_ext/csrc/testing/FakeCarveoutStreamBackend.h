#pragma once

// A CPU test double for at::cuda::CarveoutStreamBackend and a scripted
// multi-threaded scenario that drives an at::cuda::CarveoutStreamCache with
// it. Lets the CPU tests check what only a GPU could show otherwise: streams
// created once per (device, partition, caller stream), two reused events
// per entry, the bound on entries, fork/join ordering under contention,
// events recorded only on streams of their own context, the graph-capture
// pass-through, and no leaks on destruction.
//
// The double does not know how a runtime restricts a stream: the scenario
// gives it the runtime's rule (CarveoutRestriction: the ROCm CU mask or the
// CUDA green-context partition), which also raises for a k the runtime
// cannot honour, as the real backends do.

#include <ATen/cuda/CarveoutStreamCache.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace overlap_ops::testing {

// What a scenario observed. Field order matches
// carveout_scenario_field_names().
struct CarveoutScenarioCounts {
  int64_t streams_created = 0;
  int64_t events_created = 0;
  int64_t records = 0;
  int64_t waits = 0;
  int64_t streams_destroyed = 0;
  int64_t events_destroyed = 0;
  int64_t cache_entries = 0;  // cache size before it was destroyed
  int64_t forks = 0;
  int64_t pass_through = 0;   // forks that returned the current stream
  // Forks whose stream has the wrong device, partition or restriction for
  // their (device, k), or was handed to another caller stream before.
  int64_t wrong_stream = 0;
  // A wait that did not directly follow its own thread's record of the
  // same event, or that waited on the stream it recorded; or a record of an
  // event on a stream of another context.
  int64_t ordering_violations = 0;
  // Most restricted streams alive at once.
  int64_t peak_live_streams = 0;
};

// How a runtime restricts a stream (the same on every fake device).
struct CarveoutRestriction {
  // k -> the partition it leaves (SMs or CUs enabled); raises c10::Error
  // for a k the runtime cannot honour.
  std::function<int64_t(int64_t)> partition;
  // partition -> what the runtime builds for it (mask words, SM count).
  std::function<std::vector<int64_t>(int64_t)> describe;
};

struct CarveoutScenario {
  int64_t num_threads = 1;
  int64_t calls_per_thread = 1;
  std::vector<int64_t> carveouts;  // thread t, call c uses a rotating k
  int64_t num_devices = 1;
  bool capturing = false;  // every current stream reports capture
  // The cache's bound; 0: CarveoutStreamCache::kDefaultMaxEntries.
  int64_t max_entries = 0;
  CarveoutRestriction restriction;
};

CarveoutScenarioCounts run_carveout_stream_scenario(
    const CarveoutScenario& scenario);

std::vector<std::string> carveout_scenario_field_names();

// Two caller streams, A and B, drive one cache on a double that models
// stream and event semantics (each stream carries the set of work items
// that must finish before its next item starts). Work is queued between
// each fork and its join, and B queues long work (a collective) before its
// fork; some calls interleave. Returns {B's items that A's work waits on,
// A's items that B's work waits on}: both 0 when neither caller stream
// orders the other through a restricted stream. A uses carveout_a, B
// carveout_b.
std::vector<int64_t> run_two_caller_streams_scenario(
    int64_t carveout_a,
    int64_t carveout_b,
    const CarveoutRestriction& restriction);
std::vector<int64_t> carveout_scenario_counts_as_list(
    const CarveoutScenarioCounts& counts);

}  // namespace overlap_ops::testing
