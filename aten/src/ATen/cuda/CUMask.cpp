// Pure CU-mask builder for the ROCm SM carveout; see CUMask.h for the rule.

#include <ATen/cuda/CUMask.h>

#include <ATen/cuda/SMCarveout.h>
#include <c10/util/Exception.h>

namespace at::cuda {

namespace {

void check_topology(int64_t total_cus, int64_t num_xcc, bool wgp_pairs) {
  TORCH_CHECK(
      total_cus > 0,
      "build_cu_mask: total_cus must be positive, got total_cus=",
      total_cus);
  TORCH_CHECK(
      num_xcc >= 1 && num_xcc <= total_cus,
      "build_cu_mask: num_xcc must be in [1, ", total_cus,
      "] (at least one XCC, at most one per CU), got num_xcc=", num_xcc);
  if (!wgp_pairs) {
    return;
  }
  TORCH_CHECK(
      total_cus % kCUsPerWGP == 0,
      "build_cu_mask: with wgp_pairs, total_cus must be a multiple of ",
      kCUsPerWGP, " (CUs come in WGP pairs), got total_cus=", total_cus);
  TORCH_CHECK(
      num_xcc == 1,
      "build_cu_mask: with wgp_pairs, num_xcc must be 1 (no gfx10+ part has "
      "several XCCs), got num_xcc=", num_xcc);
}

}  // namespace

int64_t cu_carveout_enabled_count(
    int64_t total_cus,
    int64_t carveout,
    bool wgp_pairs) {
  if (!wgp_pairs) {
    return total_cus - carveout;
  }
  const int64_t wgps_free = (carveout + kCUsPerWGP - 1) / kCUsPerWGP;
  const int64_t enabled = total_cus - wgps_free * kCUsPerWGP;
  return enabled > 0 ? enabled : kCUsPerWGP;
}

int64_t cu_carveout_enabled_count_whole_xcc_rounds(
    int64_t total_cus,
    int64_t carveout,
    int64_t num_xcc) {
  const int64_t rounds_free = (carveout + num_xcc - 1) / num_xcc;
  const int64_t enabled = total_cus - rounds_free * num_xcc;
  return enabled > 0 ? enabled : num_xcc;
}

int64_t cu_mask_num_words(int64_t total_cus) {
  return (total_cus + kCUMaskWordBits - 1) / kCUMaskWordBits;
}

void check_cu_carveout(int64_t total_cus, int64_t carveout) {
  // The shared policy owns the range check and its message (CUDA and ROCm
  // report a bad k the same way).
  (void)sm_count_after_carveout(total_cus, carveout);
}

std::vector<uint32_t> build_cu_mask(
    int64_t total_cus,
    int64_t carveout,
    int64_t num_xcc,
    bool wgp_pairs) {
  check_topology(total_cus, num_xcc, wgp_pairs);
  check_cu_carveout(total_cus, carveout);

  return cu_mask_enabling(
      total_cus, cu_carveout_enabled_count(total_cus, carveout, wgp_pairs));
}

std::vector<uint32_t> cu_mask_enabling(int64_t total_cus, int64_t enabled) {
  TORCH_CHECK(
      enabled >= 1 && enabled <= total_cus,
      "cu_mask_enabling: enabled must be in [1, ", total_cus,
      "] (a queue with no CUs hangs), got enabled=", enabled);
  std::vector<uint32_t> mask(cu_mask_num_words(total_cus), 0u);
  const int64_t full_words = enabled / kCUMaskWordBits;
  const int64_t tail_bits = enabled % kCUMaskWordBits;
  for (int64_t word = 0; word < full_words; ++word) {
    mask[word] = ~uint32_t{0};
  }
  // tail_bits < 32 keeps the shift defined: shifting a uint32_t by 32 is UB.
  if (tail_bits > 0) {
    mask[full_words] = (uint32_t{1} << tail_bits) - 1u;
  }
  return mask;
}

int64_t cu_carveout_from_sm_carveout(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t sm_carveout) {
  TORCH_CHECK(
      total_cus > 0,
      "build_cu_mask: total_cus must be positive, got total_cus=",
      total_cus);
  TORCH_CHECK(
      cus_per_sm >= 1 && total_cus % cus_per_sm == 0,
      "build_cu_mask: cus_per_sm must be >= 1 and divide total_cus=",
      total_cus, " (CUs per SM as the runtime counts SMs), got cus_per_sm=",
      cus_per_sm);
  check_cu_carveout(total_cus / cus_per_sm, sm_carveout);
  return sm_carveout * cus_per_sm;
}

std::vector<uint32_t> build_sm_carveout_cu_mask(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t sm_carveout,
    int64_t num_xcc,
    bool wgp_pairs) {
  const int64_t carveout =
      cu_carveout_from_sm_carveout(total_cus, cus_per_sm, sm_carveout);
  return build_cu_mask(total_cus, carveout, num_xcc, wgp_pairs);
}

std::vector<uint32_t> build_sm_carveout_cu_mask(
    const CUTopology& topo,
    int64_t sm_carveout) {
  return build_sm_carveout_cu_mask(
      topo.total_cus, topo.cus_per_sm, sm_carveout, topo.num_xcc,
      topo.wgp_pairs);
}

int64_t sm_carveout_sm_count_target(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t sm_carveout,
    bool wgp_pairs) {
  const int64_t carveout =
      cu_carveout_from_sm_carveout(total_cus, cus_per_sm, sm_carveout);
  if (carveout == 0) {
    return 0;
  }
  return cu_carveout_enabled_count(total_cus, carveout, wgp_pairs) /
      cus_per_sm;
}

int64_t sm_carveout_enabled_cus(
    const CUTopology& topo,
    int64_t sm_carveout,
    bool whole_xcc_rounds) {
  check_topology(topo.total_cus, topo.num_xcc, topo.wgp_pairs);
  const int64_t carveout = cu_carveout_from_sm_carveout(
      topo.total_cus, topo.cus_per_sm, sm_carveout);
  if (whole_xcc_rounds && topo.num_xcc > 1) {
    return cu_carveout_enabled_count_whole_xcc_rounds(
        topo.total_cus, carveout, topo.num_xcc);
  }
  return cu_carveout_enabled_count(topo.total_cus, carveout, topo.wgp_pairs);
}

bool hipblaslt_takes_sm_count_target(int64_t runtime_version) {
  return runtime_version >= kHipblasltSmCountTargetMinVersion;
}

}  // namespace at::cuda
