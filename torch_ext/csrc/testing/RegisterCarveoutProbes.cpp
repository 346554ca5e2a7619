// Test-only ops (namespace overlap_ops_testing) that expose the SM carveout
// host logic to the CPU tests: the policy (aten/src/ATen/cuda/SMCarveout.h),
// the ROCm CU mask (CUMask.h), and the restricted-stream cache
// (CarveoutStreamCache.h) driven by the counting double of
// FakeCarveoutStreamBackend.h. This file only routes to aten/ and to the
// double; the carveout logic lives in aten/.

#include "FakeCarveoutStreamBackend.h"

#include <ATen/cuda/CUMask.h>
#include <ATen/cuda/SMCarveout.h>

#include <torch/library.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace overlap_ops::testing {
namespace {

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

std::vector<int64_t> run_scenario(
    int64_t num_threads,
    int64_t calls_per_thread,
    std::vector<int64_t> carveouts,
    int64_t num_devices,
    bool capturing,
    CarveoutRestriction restriction) {
  CarveoutScenario scenario;
  scenario.num_threads = num_threads;
  scenario.calls_per_thread = calls_per_thread;
  scenario.carveouts = std::move(carveouts);
  scenario.num_devices = num_devices;
  scenario.capturing = capturing;
  scenario.restriction = std::move(restriction);
  return carveout_scenario_counts_as_list(
      run_carveout_stream_scenario(scenario));
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
    int64_t cus_per_sm) {
  const at::cuda::CUTopology topo{total_cus, num_xcc, wgp_pairs, cus_per_sm};
  return run_scenario(
      num_threads, calls_per_thread, std::move(carveouts), num_devices,
      capturing, [topo](int64_t k) {
        return as_int64(at::cuda::build_sm_carveout_cu_mask(topo, k));
      });
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
    int64_t alignment) {
  return run_scenario(
      num_threads, calls_per_thread, std::move(carveouts), num_devices,
      capturing, [=](int64_t k) {
        return std::vector<int64_t>{at::cuda::green_context_sm_count(
            total_sms, k, min_partition, alignment)};
      });
}

// Two caller streams on the stream-semantics double, with streams
// restricted as the CUDA green-context backend does.
std::vector<int64_t> two_caller_streams_scenario(
    int64_t k_a,
    int64_t k_b,
    int64_t total_sms,
    int64_t min_partition,
    int64_t alignment) {
  return run_two_caller_streams_scenario(k_a, k_b, [=](int64_t k) {
    return std::vector<int64_t>{at::cuda::green_context_sm_count(
        total_sms, k, min_partition, alignment)};
  });
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
  m.def("cu_mask_stream_scenario(int num_threads, int calls_per_thread, "
        "int[] carveouts, int num_devices, bool capturing, int total_cus, "
        "int num_xcc, bool wgp_pairs, int cus_per_sm) -> int[]",
        &t::cu_mask_stream_scenario);
  m.def("green_context_stream_scenario(int num_threads, "
        "int calls_per_thread, int[] carveouts, int num_devices, "
        "bool capturing, int total_sms, int min_partition, int alignment) "
        "-> int[]",
        &t::green_context_stream_scenario);
  m.def("two_caller_streams_scenario(int k_a, int k_b, int total_sms, "
        "int min_partition, int alignment) -> int[]",
        &t::two_caller_streams_scenario);
  m.def("stream_scenario_fields() -> str[]",
        &t::carveout_scenario_field_names);
}
