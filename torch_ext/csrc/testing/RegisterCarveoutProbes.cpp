// Test-only ops (namespace overlap_ops_testing) that expose the SM carveout
// host logic to the CPU tests: the policy (aten/src/ATen/cuda/SMCarveout.h),
// the ROCm CU mask (CUMask.h), and the restricted-stream cache
// (CarveoutStreamCache.h) driven by the C++ tests' doubles
// (ATen/test/carveout_stream_fakes.h). This file only routes to aten/ and to
// the doubles; the carveout logic lives in aten/.

#include <ATen/cuda/CUMask.h>
#include <ATen/cuda/SMCarveout.h>
#include <ATen/test/carveout_stream_fakes.h>

#include <torch/library.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace overlap_ops::testing {
namespace {

using at::cuda::testing::CarveoutRestriction;
using at::cuda::testing::CarveoutScenario;
using at::cuda::testing::CarveoutScenarioCounts;

// The names of carveout_scenario_counts_as_list's entries, in order.
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

std::vector<int64_t> as_int64(const std::vector<uint32_t>& words) {
  return std::vector<int64_t>(words.begin(), words.end());
}

int64_t sm_count_after_carveout(int64_t total_sms, int64_t k) {
  return at::cuda::sm_count_after_carveout(total_sms, k);
}

int64_t blas_sm_count_target(int64_t total_sms) {
  return at::cuda::blas_sm_count_target(total_sms);
}

int64_t green_context_sm_count(
    int64_t total_sms,
    int64_t k,
    int64_t min_partition,
    int64_t alignment) {
  return at::cuda::green_context_sm_count(
      total_sms, k, min_partition, alignment);
}

std::vector<int64_t> rocm_cu_mask(
    int64_t total_cus,
    int64_t k,
    int64_t num_xcc,
    bool wgp_pairs) {
  return as_int64(at::cuda::build_cu_mask(total_cus, k, num_xcc, wgp_pairs));
}

std::vector<int64_t> rocm_sm_carveout_cu_mask(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t k,
    int64_t num_xcc,
    bool wgp_pairs) {
  return as_int64(at::cuda::build_sm_carveout_cu_mask(
      total_cus, cus_per_sm, k, num_xcc, wgp_pairs));
}

int64_t rocm_sm_count_target(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t k,
    bool wgp_pairs) {
  return at::cuda::sm_carveout_sm_count_target(
      total_cus, cus_per_sm, k, wgp_pairs);
}

// The CUDA green-context rule: the partition is the planned SM count.
CarveoutRestriction green_context_restriction(
    int64_t total_sms,
    int64_t min_partition,
    int64_t alignment) {
  return CarveoutRestriction{
      [=](int64_t k) {
        return at::cuda::green_context_sm_count(
            total_sms, k, min_partition, alignment);
      },
      [](int64_t partition) { return std::vector<int64_t>{partition}; }};
}

// The ROCm rule: the partition is the number of CUs the mask enables.
CarveoutRestriction cu_mask_restriction(
    const at::cuda::CUTopology& topo,
    bool whole_xcc_rounds) {
  return CarveoutRestriction{
      [=](int64_t k) {
        return at::cuda::sm_carveout_enabled_cus(topo, k, whole_xcc_rounds);
      },
      [=](int64_t partition) {
        return as_int64(at::cuda::cu_mask_enabling(topo.total_cus, partition));
      }};
}

int64_t rocm_sm_carveout_enabled_cus(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t k,
    int64_t num_xcc,
    bool wgp_pairs,
    bool whole_xcc_rounds) {
  const at::cuda::CUTopology topo{total_cus, num_xcc, wgp_pairs, cus_per_sm};
  return at::cuda::sm_carveout_enabled_cus(topo, k, whole_xcc_rounds);
}

std::vector<int64_t> rocm_cu_mask_enabling(int64_t total_cus,
                                           int64_t enabled) {
  return as_int64(at::cuda::cu_mask_enabling(total_cus, enabled));
}

bool hipblaslt_takes_sm_count_target(int64_t runtime_version) {
  return at::cuda::hipblaslt_takes_sm_count_target(runtime_version);
}

std::vector<int64_t> run_scenario(
    int64_t num_threads,
    int64_t calls_per_thread,
    std::vector<int64_t> carveouts,
    int64_t num_devices,
    bool capturing,
    int64_t max_entries,
    CarveoutRestriction restriction) {
  CarveoutScenario scenario;
  scenario.num_threads = num_threads;
  scenario.calls_per_thread = calls_per_thread;
  scenario.carveouts = std::move(carveouts);
  scenario.num_devices = num_devices;
  scenario.capturing = capturing;
  scenario.max_entries = max_entries;
  scenario.restriction = std::move(restriction);
  return carveout_scenario_counts_as_list(
      at::cuda::testing::run_carveout_stream_scenario(scenario));
}

// The cache on the double, restricting streams with ROCm's CU mask.
std::vector<int64_t> cu_mask_stream_scenario(
    int64_t num_threads,
    int64_t calls_per_thread,
    std::vector<int64_t> carveouts,
    int64_t num_devices,
    bool capturing,
    int64_t total_cus,
    int64_t num_xcc,
    bool wgp_pairs,
    int64_t cus_per_sm,
    int64_t max_entries,
    bool whole_xcc_rounds) {
  const at::cuda::CUTopology topo{total_cus, num_xcc, wgp_pairs, cus_per_sm};
  return run_scenario(
      num_threads, calls_per_thread, std::move(carveouts), num_devices,
      capturing, max_entries, cu_mask_restriction(topo, whole_xcc_rounds));
}

// The cache on the double, restricting streams with CUDA green contexts.
std::vector<int64_t> green_context_stream_scenario(
    int64_t num_threads,
    int64_t calls_per_thread,
    std::vector<int64_t> carveouts,
    int64_t num_devices,
    bool capturing,
    int64_t total_sms,
    int64_t min_partition,
    int64_t alignment,
    int64_t max_entries) {
  return run_scenario(
      num_threads, calls_per_thread, std::move(carveouts), num_devices,
      capturing, max_entries,
      green_context_restriction(total_sms, min_partition, alignment));
}

// Two caller streams on the stream-semantics double, with streams
// restricted as the CUDA green-context backend does.
std::vector<int64_t> two_caller_streams_scenario(
    int64_t k_a,
    int64_t k_b,
    int64_t total_sms,
    int64_t min_partition,
    int64_t alignment) {
  return at::cuda::testing::run_two_caller_streams_scenario(
      k_a, k_b,
      green_context_restriction(total_sms, min_partition, alignment)
          .partition);
}

}  // namespace
}  // namespace overlap_ops::testing

TORCH_LIBRARY_FRAGMENT(overlap_ops_testing, m) {
  namespace t = overlap_ops::testing;
  m.def("sm_count_after_carveout(int total_sms, int k) -> int",
        &t::sm_count_after_carveout);
  m.def("blas_sm_count_target(int total_sms) -> int",
        &t::blas_sm_count_target);
  m.def("green_context_sm_count(int total_sms, int k, int min_partition, "
        "int alignment) -> int",
        &t::green_context_sm_count);
  m.def("rocm_cu_mask(int total_cus, int k, int num_xcc, bool wgp_pairs) "
        "-> int[]",
        &t::rocm_cu_mask);
  m.def("rocm_sm_carveout_cu_mask(int total_cus, int cus_per_sm, int k, "
        "int num_xcc, bool wgp_pairs) -> int[]",
        &t::rocm_sm_carveout_cu_mask);
  m.def("rocm_sm_count_target(int total_cus, int cus_per_sm, int k, "
        "bool wgp_pairs) -> int",
        &t::rocm_sm_count_target);
  m.def("rocm_sm_carveout_enabled_cus(int total_cus, int cus_per_sm, "
        "int k, int num_xcc, bool wgp_pairs, bool whole_xcc_rounds) -> int",
        &t::rocm_sm_carveout_enabled_cus);
  m.def("rocm_cu_mask_enabling(int total_cus, int enabled) -> int[]",
        &t::rocm_cu_mask_enabling);
  m.def("hipblaslt_takes_sm_count_target(int runtime_version) -> bool",
        &t::hipblaslt_takes_sm_count_target);
  m.def("cu_mask_stream_scenario(int num_threads, int calls_per_thread, "
        "int[] carveouts, int num_devices, bool capturing, int total_cus, "
        "int num_xcc, bool wgp_pairs, int cus_per_sm, int max_entries, "
        "bool whole_xcc_rounds) -> int[]",
        &t::cu_mask_stream_scenario);
  m.def("green_context_stream_scenario(int num_threads, "
        "int calls_per_thread, int[] carveouts, int num_devices, "
        "bool capturing, int total_sms, int min_partition, int alignment, "
        "int max_entries) -> int[]",
        &t::green_context_stream_scenario);
  m.def("two_caller_streams_scenario(int k_a, int k_b, int total_sms, "
        "int min_partition, int alignment) -> int[]",
        &t::two_caller_streams_scenario);
  m.def("stream_scenario_fields() -> str[]",
        &t::carveout_scenario_field_names);
}
