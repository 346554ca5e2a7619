// Registers private overlap_ops ops that expose the carveout host logic
// (aten/src/ATen/cuda/CUMask.h, SMCarveout.h, CarveoutStreamCache.h) to the
// CPU tests. This file only routes to aten/; no carveout logic lives here.

#include <ATen/cuda/CUMask.h>
#include <ATen/cuda/FakeCarveoutStreamBackend.h>
#include <ATen/cuda/SMCarveout.h>

#include <torch/library.h>

#include <string>
#include <vector>

namespace overlap_ops {
namespace {

std::vector<int64_t> rocm_cu_mask(
    int64_t total_cus,
    int64_t k,
    int64_t num_xcc,
    bool wgp_pairs) {
  const std::vector<uint32_t> words =
      at::cuda::build_cu_mask(total_cus, k, num_xcc, wgp_pairs);
  return std::vector<int64_t>(words.begin(), words.end());
}

std::vector<int64_t> rocm_sm_carveout_cu_mask(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t k,
    int64_t num_xcc,
    bool wgp_pairs) {
  const std::vector<uint32_t> words = at::cuda::build_sm_carveout_cu_mask(
      total_cus, cus_per_sm, k, num_xcc, wgp_pairs);
  return std::vector<int64_t>(words.begin(), words.end());
}

int64_t rocm_sm_count_target(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t k,
    bool wgp_pairs) {
  return at::cuda::sm_carveout_sm_count_target(
      total_cus, cus_per_sm, k, wgp_pairs);
}

std::vector<int64_t> run_scenario(
    int64_t num_threads,
    int64_t calls_per_thread,
    std::vector<int64_t> carveouts,
    int64_t num_devices,
    bool capturing,
    at::cuda::CarveoutRestriction restriction) {
  at::cuda::CarveoutScenario scenario;
  scenario.num_threads = num_threads;
  scenario.calls_per_thread = calls_per_thread;
  scenario.carveouts = std::move(carveouts);
  scenario.num_devices = num_devices;
  scenario.capturing = capturing;
  scenario.restriction = std::move(restriction);
  return at::cuda::carveout_scenario_counts_as_list(
      at::cuda::run_carveout_stream_scenario(scenario));
}

// The cache on the double, restricting streams with ROCm's CU mask.
std::vector<int64_t> carveout_stream_scenario(
    int64_t num_threads,
    int64_t calls_per_thread,
    std::vector<int64_t> carveouts,
    int64_t num_devices,
    bool capturing,
    int64_t total_cus,
    int64_t num_xcc,
    bool wgp_pairs,
    int64_t cus_per_sm) {
  const at::cuda::CUTopology topo{total_cus, num_xcc, wgp_pairs, cus_per_sm};
  return run_scenario(
      num_threads, calls_per_thread, std::move(carveouts), num_devices,
      capturing, [topo](int64_t k) {
        const std::vector<uint32_t> words =
            at::cuda::build_sm_carveout_cu_mask(topo, k);
        return std::vector<int64_t>(words.begin(), words.end());
      });
}

// The cache on the double, restricting streams with CUDA green contexts.
std::vector<int64_t> green_carveout_stream_scenario(
    int64_t num_threads,
    int64_t calls_per_thread,
    std::vector<int64_t> carveouts,
    int64_t num_devices,
    bool capturing,
    int64_t total_sms,
    int64_t min_partition,
    int64_t alignment) {
  return run_scenario(
      num_threads, calls_per_thread, std::move(carveouts), num_devices,
      capturing, [=](int64_t k) {
        return std::vector<int64_t>{at::cuda::green_context_sm_count(
            total_sms, k, min_partition, alignment)};
      });
}

std::vector<std::string> carveout_stream_scenario_fields() {
  return at::cuda::carveout_scenario_field_names();
}

}  // namespace
}  // namespace overlap_ops

TORCH_LIBRARY_FRAGMENT(overlap_ops, m) {
  m.def("_rocm_cu_mask(int total_cus, int k, int num_xcc, bool wgp_pairs) "
        "-> int[]",
        &overlap_ops::rocm_cu_mask);
  m.def("_rocm_sm_carveout_cu_mask(int total_cus, int cus_per_sm, int k, "
        "int num_xcc, bool wgp_pairs) -> int[]",
        &overlap_ops::rocm_sm_carveout_cu_mask);
  m.def("_rocm_sm_count_target(int total_cus, int cus_per_sm, int k, "
        "bool wgp_pairs) -> int",
        &overlap_ops::rocm_sm_count_target);
  m.def("_carveout_stream_scenario(int num_threads, int calls_per_thread, "
        "int[] carveouts, int num_devices, bool capturing, int total_cus, "
        "int num_xcc, bool wgp_pairs, int cus_per_sm=1) -> int[]",
        &overlap_ops::carveout_stream_scenario);
  m.def("_green_carveout_stream_scenario(int num_threads, "
        "int calls_per_thread, int[] carveouts, int num_devices, "
        "bool capturing, int total_sms, int min_partition, int alignment) "
        "-> int[]",
        &overlap_ops::green_carveout_stream_scenario);
  m.def("_carveout_stream_scenario_fields() -> str[]",
        &overlap_ops::carveout_stream_scenario_fields);
}
