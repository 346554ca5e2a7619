#pragma once

// Builds the compute-unit (CU) mask that ROCm's carveout runs GEMMs under.
// Pure host code with no HIP dependency, so the same function is used by the
// HIP stream cache and by the CPU unit tests (test/test_cu_mask.py).
//
// Mask format (hipExtStreamCreateWithCUMask): an array of 32-bit words, bit
// i of the mask is bit (i % 32) of word (i / 32); a set bit enables CU i.
//
// How the driver reads the mask (amdkfd / amdgpu
// mqd_symmetrically_map_cu_mask):
//  - Multi-XCC parts (gfx942 MI300X, gfx950 MI355X): bit i belongs to XCC
//    i % num_xcc; inside an XCC consecutive bits go round-robin over shader
//    engines and shader arrays.
//  - gfx10 and later (RDNA, "WGP mode"): CUs come in work-group processors
//    of two CUs, and the driver enables or disables a whole WGP per mask bit
//    pair (bits 2j and 2j+1 are WGP j). Depending on the kernel version it
//    reads either bit of the pair or only the even one, so a pair is only
//    well-defined when both of its bits agree.

#include <cstdint>
#include <vector>

namespace at::cuda {

constexpr int64_t kCUMaskWordBits = 32;
// CUs per work-group processor on gfx10+ parts.
constexpr int64_t kCUsPerWGP = 2;

// What the mask builder needs to know about a device.
struct CUTopology {
  int64_t total_cus = 0;  // physical CUs: one mask bit each
  int64_t num_xcc = 1;
  bool wgp_pairs = false;  // gfx10+: CUs are enabled in WGP pairs
  // CUs per SM as the runtime counts SMs (multiProcessorCount), the unit of
  // the carveout k: 2 on gfx10+ in WGP mode (HIP counts WGPs), else 1.
  int64_t cus_per_sm = 1;
};

// Returns the mask words that leave `carveout` CUs free for other work
// (collectives) and enable the rest.
//
// Rule: enable the lowest E mask bits and clear every other bit, where
//  - E = total_cus - carveout without the WGP rule;
//  - with wgp_pairs (gfx10+), the carveout is rounded up to whole WGPs, so
//    E = total_cus - 2 * ceil(carveout / 2): at least `carveout` CUs are
//    free, and both bits of every pair agree. When that would leave no CU
//    enabled (carveout == total_cus - 1), one WGP stays enabled: a queue with
//    no CUs hangs.
//
// Why the lowest bits: bits 0..E-1 visit the XCCs round-robin (bit i ->
// XCC i % num_xcc), so the enabled CUs per XCC differ by at most one for
// every XCC count. The mask therefore stays balanced even if num_xcc was
// queried wrongly; num_xcc is only validated here.
//
// Raises c10::Error naming the argument for total_cus <= 0, num_xcc outside
// [1, total_cus], carveout outside [0, total_cus), or wgp_pairs with an odd
// total_cus or more than one XCC (no such part; the driver's bit layout for
// it is undefined).
std::vector<uint32_t> build_cu_mask(
    int64_t total_cus,
    int64_t carveout,
    int64_t num_xcc,
    bool wgp_pairs);

// Checks 0 <= carveout < total_cus through the shared SM-carveout policy
// (SMCarveout.h), so ROCm reports a bad k exactly as CUDA does.
void check_cu_carveout(int64_t total_cus, int64_t carveout);

// Number of CUs build_cu_mask enables for a valid carveout (the rule
// above).
int64_t cu_carveout_enabled_count(
    int64_t total_cus,
    int64_t carveout,
    bool wgp_pairs);

// XCC-granular option, for multi-XCC parts. The lowest-bits rule leaves
// the XCCs within one CU of each other (MI300X at k = 4: 38 CUs on four
// XCCs, 37 on the other four). Work is dispatched round-robin over the
// XCCs, so a GEMM whose workgroups fill every XCC evenly finishes with the
// smallest one. With this option the carveout is rounded up to whole rounds
// of num_xcc CUs, E = total_cus - num_xcc * ceil(carveout / num_xcc), so
// every XCC keeps the same number of CUs and at least `carveout` CUs are
// free. As with WGPs, when that would enable no CU one round stays enabled.
// With num_xcc == 1 it is the plain rule.
int64_t cu_carveout_enabled_count_whole_xcc_rounds(
    int64_t total_cus,
    int64_t carveout,
    int64_t num_xcc);

// The mask words that enable exactly the lowest `enabled` of `total_cus`
// CUs (1 <= enabled <= total_cus). A mask is fully described by its
// enabled count, which is what the stream cache keys on.
std::vector<uint32_t> cu_mask_enabling(int64_t total_cus, int64_t enabled);

// Number of mask words that cover total_cus bits.
int64_t cu_mask_num_words(int64_t total_cus);

// Units. The carveout k that users set counts the runtime's SMs
// (hipDeviceProp_t::multiProcessorCount, torch's multi_processor_count), as
// on CUDA. On gfx10+ in WGP mode, HIP's default, that count is the number of
// WGPs, so one SM is cus_per_sm = 2 CUs, while the mask has one bit per CU
// (total_cus = hipDeviceAttributePhysicalMultiProcessorCount). Everywhere
// else cus_per_sm = 1.
//
// Checks cus_per_sm >= 1 dividing total_cus, and 0 <= k < total_cus /
// cus_per_sm (the device's SM count, through the shared policy, so the
// message is CUDA's); returns the CUs to leave free, k * cus_per_sm.
int64_t cu_carveout_from_sm_carveout(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t sm_carveout);

// The mask for an SM carveout k: build_cu_mask(total_cus,
// cu_carveout_from_sm_carveout(...), num_xcc, wgp_pairs). The HIP stream
// backend (ATen/hip/CarveoutStreamHIP.cpp) builds every mask with it.
std::vector<uint32_t> build_sm_carveout_cu_mask(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t sm_carveout,
    int64_t num_xcc,
    bool wgp_pairs);

// The hipBLASLt SM_COUNT_TARGET hint that goes with that mask, in SMs (the
// library's unit, multiProcessorCount): the enabled CUs / cus_per_sm; 0 (no
// hint) for k == 0.
int64_t sm_carveout_sm_count_target(
    int64_t total_cus,
    int64_t cus_per_sm,
    int64_t sm_carveout,
    bool wgp_pairs);

// build_sm_carveout_cu_mask for a device described by `topo`.
std::vector<uint32_t> build_sm_carveout_cu_mask(
    const CUTopology& topo,
    int64_t sm_carveout);

// CUs the mask for an SM carveout k enables on `topo`: the partition the
// stream cache keys on. `whole_xcc_rounds` selects the XCC-granular option
// above (ignored when topo.num_xcc == 1). Checks like
// build_sm_carveout_cu_mask.
int64_t sm_carveout_enabled_cus(
    const CUTopology& topo,
    int64_t sm_carveout,
    bool whole_xcc_rounds);

// hipBLASLt's SM_COUNT_TARGET matmul attribute exists from hipBLASLt 1.4
// on. The header only tells what the build saw; an older libhipblaslt at
// run time rejects the attribute, so the version the library reports
// (hipblasLtGetVersion: major * 100000 + minor * 100 + patch) decides.
constexpr int64_t kHipblasltSmCountTargetMinVersion = 100400;

// Whether a hipBLASLt that reports `runtime_version` takes the hint. A
// version that could not be read (negative) means no: the CU mask alone
// still bounds the GEMM.
bool hipblaslt_takes_sm_count_target(int64_t runtime_version);

}  // namespace at::cuda
