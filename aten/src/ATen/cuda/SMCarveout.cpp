// Portable part of the SM-carveout policy: no CUDA headers, so it builds and
// is tested on CPU-only machines.

#include <ATen/cuda/SMCarveout.h>

#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <string>

namespace at::cuda {

int64_t requested_sm_carveout() {
  const std::optional<int32_t> k =
      at::globalContext()._SMCarveout_EXPERIMENTAL();
  return k.has_value() ? *k : 0;
}

void check_sm_carveout(int64_t carveout) {
  TORCH_CHECK(
      carveout >= 0, "sm_carveout: the carveout must satisfy k >= 0, got k = ",
      carveout);
}

int64_t sm_count_after_carveout(int64_t total_sms, int64_t carveout) {
  TORCH_CHECK(
      total_sms > 0, "sm_carveout: the device reports ", total_sms, " SMs");
  TORCH_CHECK(
      carveout >= 0 && carveout < total_sms,
      "sm_carveout: the carveout must satisfy 0 <= k < ", total_sms,
      " (the device's SM count), got k = ", carveout);
  return total_sms - carveout;
}

int64_t effective_sm_count(int64_t total_sms) {
  return sm_count_after_carveout(total_sms, requested_sm_carveout());
}

int32_t blas_sm_count_target(int64_t total_sms) {
  const int64_t carveout = requested_sm_carveout();
  if (carveout == 0) {
    return 0;
  }
  return static_cast<int32_t>(sm_count_after_carveout(total_sms, carveout));
}

int64_t green_context_sm_count(
    int64_t total_sms,
    int64_t carveout,
    int64_t min_partition,
    int64_t alignment) {
  TORCH_CHECK(
      min_partition >= 1 && alignment >= 1,
      "sm_carveout: the green-context granularity must be positive, got ",
      "min_partition = ", min_partition, ", alignment = ", alignment);
  const int64_t budget = sm_count_after_carveout(total_sms, carveout);
  if (carveout == 0) {
    return total_sms;
  }
  const int64_t count = budget / alignment * alignment;
  if (count >= min_partition) {
    return count;
  }
  // The smallest partition the driver creates: min_partition rounded up to
  // the alignment.
  const int64_t smallest =
      (min_partition + alignment - 1) / alignment * alignment;
  TORCH_CHECK(
      false, "sm_carveout: k = ", carveout, " leaves ", budget, " of ",
      total_sms, " SMs, fewer than the smallest green-context partition "
      "on this device (", smallest, " SMs, in multiples of ", alignment,
      "), which confines GEMMs whose kernels are not persistent (float32, "
      "float64, complex); ",
      smallest < total_sms
          ? "use k <= " + std::to_string(total_sms - smallest)
          : std::string("this device cannot be partitioned"));
}

}  // namespace at::cuda
