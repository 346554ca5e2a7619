#pragma once

// A CPU test double for CarveoutStreamBackend and a scripted multi-threaded
// scenario that drives a CarveoutStreamCache with it. Lets the CPU tests
// check what only a GPU could show otherwise: streams created once per
// (device, k), one reused event per entry, fork/join ordering under
// contention, the graph-capture pass-through, and no leaks on destruction.

#include <ATen/cuda/CarveoutStreamCache.h>

#include <cstdint>
#include <string>
#include <vector>

namespace at::cuda {

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
  // Forks whose stream has the wrong device or mask for their (device, k).
  int64_t wrong_stream = 0;
  // A wait that did not directly follow its own thread's record of the
  // same event, or that waited on the stream it recorded.
  int64_t ordering_violations = 0;
};

struct CarveoutScenario {
  int64_t num_threads = 1;
  int64_t calls_per_thread = 1;
  std::vector<int64_t> carveouts;  // thread t, call c uses a rotating k
  int64_t num_devices = 1;
  bool capturing = false;  // every current stream reports capture
  CUTopology topology;     // the same for every fake device
};

CarveoutScenarioCounts run_carveout_stream_scenario(
    const CarveoutScenario& scenario);

std::vector<std::string> carveout_scenario_field_names();
std::vector<int64_t> carveout_scenario_counts_as_list(
    const CarveoutScenarioCounts& counts);

}  // namespace at::cuda
