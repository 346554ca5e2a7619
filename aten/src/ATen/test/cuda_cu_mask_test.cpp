#include <gtest/gtest.h>

#include <ATen/cuda/CUMask.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// The ROCm SM-carveout CU mask (ATen/cuda/CUMask.h), for every carveout k
// of several AMD parts, against a small simulation of how the driver maps
// mask bits to XCCs and WGPs; plus regressions that upstream's formula
// (_getCarveoutStream in CUDABlas.cpp) fails. Pure host code: no GPU.

namespace {

constexpr int64_t kWordBits = 32;
constexpr int64_t kCUsPerWGP = 2;

// CU topology of one AMD GPU (one GCD or partition).
struct Part {
  const char* name;
  int64_t total_cus;  // physical CUs: one mask bit each
  int64_t num_xcc;
  bool wgp_pairs;  // gfx10+: the driver enables CUs in WGP pairs
  // CUs per SM as HIP counts SMs (multiProcessorCount, the unit of k): 2 on
  // gfx10+ in WGP mode, HIP's default, where it counts WGPs.
  int64_t cus_per_sm = 1;

  // What the runtime reports as the SM count: the range of k.
  int64_t sms() const {
    return total_cus / cus_per_sm;
  }
  at::cuda::CUTopology topology() const {
    return at::cuda::CUTopology{total_cus, num_xcc, wgp_pairs, cus_per_sm};
  }
};

const Part kMI300X{"mi300x", 304, 8, false};  // gfx942, 8 XCCs x 38 CUs
const Part kMI250X{"mi250x", 110, 1, false};  // gfx90a, one GCD
const Part kMI355X{"mi355x", 256, 8, false};  // gfx950, 8 XCCs x 32 CUs
const Part kMI300A{"mi300a", 228, 6, false};  // gfx942, 6 XCCs x 38 CUs
const Part kRX7900{"gfx1100", 96, 1, true};  // RDNA3, 48 WGPs
const Part kRX6800{"gfx1030", 60, 1, true};  // RDNA2, 30 WGPs
// The same gfx10+ parts as HIP reports them by default (WGP mode): k counts
// WGPs.
const Part kRX7900Wgp{"gfx1100_wgp_mode", 96, 1, true, 2};
const Part kRX6800Wgp{"gfx1030_wgp_mode", 60, 1, true, 2};

const std::vector<Part> kParts = {kMI300X, kMI250X, kMI355X,
                                  kMI300A, kRX7900, kRX6800};
const std::vector<Part> kSmParts = {kMI300X, kMI250X, kMI355X, kMI300A,
                                    kRX7900, kRX6800, kRX7900Wgp, kRX6800Wgp};
const std::vector<Part> kMultiXccParts = {kMI300X, kMI355X, kMI300A};

// What the driver would enable for a mask.
struct Occupancy {
  std::vector<int64_t> per_xcc;  // enabled CUs per XCC
  int64_t bits_past_last_cu = 0;  // set bits the driver ignores
  int64_t split_wgps = 0;  // WGP pairs whose two bits disagree (gfx10+)

  int64_t enabled() const {
    int64_t total = 0;
    for (const int64_t cus : per_xcc) {
      total += cus;
    }
    return total;
  }
  bool balanced() const {
    const auto [low, high] = std::minmax_element(per_xcc.begin(), per_xcc.end());
    return *high - *low <= 1;
  }
};

// How the driver reads a CU mask (amdkfd mqd_symmetrically_map_cu_mask):
// bit i is bit i % 32 of word i / 32 and, on multi-XCC parts, belongs to
// XCC i % num_xcc; on gfx10+ bits 2j and 2j + 1 form WGP j.
Occupancy simulate(const std::vector<uint32_t>& words, const Part& part) {
  const auto bit = [&](int64_t i) {
    return static_cast<int64_t>((words[i / kWordBits] >> (i % kWordBits)) & 1u);
  };
  Occupancy occ;
  occ.per_xcc.assign(part.num_xcc, 0);
  for (int64_t i = 0; i < part.total_cus; ++i) {
    occ.per_xcc[i % part.num_xcc] += bit(i);
  }
  const auto bits = static_cast<int64_t>(words.size()) * kWordBits;
  for (int64_t i = part.total_cus; i < bits; ++i) {
    occ.bits_past_last_cu += bit(i);
  }
  if (part.wgp_pairs) {
    for (int64_t i = 0; i < part.total_cus; i += kCUsPerWGP) {
      occ.split_wgps += bit(i) != bit(i + 1) ? 1 : 0;
    }
  }
  return occ;
}

// CUs the contract enables when k units of cus_per_k CUs stay free: CUs -
// k * cus_per_k; on gfx10+ the carveout rounds up to whole WGPs (at least k
// CUs free), and one WGP always stays enabled.
int64_t expected_enabled(const Part& part, int64_t k, int64_t cus_per_k = 1) {
  int64_t free = k * cus_per_k;
  if (!part.wgp_pairs) {
    return part.total_cus - free;
  }
  free = (free + kCUsPerWGP - 1) / kCUsPerWGP * kCUsPerWGP;
  return std::max(part.total_cus - free, kCUsPerWGP);
}

// How a mask breaks the carveout contract; empty when it holds. k counts
// CUs by default; cus_per_k = part.cus_per_sm checks a carveout in SMs.
std::vector<std::string> contract_violations(
    const std::vector<uint32_t>& words,
    const Part& part,
    int64_t k,
    int64_t cus_per_k = 1) {
  std::vector<std::string> problems;
  const auto words_wanted = (part.total_cus + kWordBits - 1) / kWordBits;
  if (static_cast<int64_t>(words.size()) != words_wanted) {
    problems.push_back(std::to_string(words.size()) + " words");
    return problems;
  }
  const Occupancy occ = simulate(words, part);
  const int64_t wanted = expected_enabled(part, k, cus_per_k);
  if (occ.enabled() != wanted) {
    problems.push_back("enables " + std::to_string(occ.enabled()) +
                       " CUs, wants " + std::to_string(wanted));
  }
  if (!occ.balanced()) {
    problems.push_back("unbalanced XCCs");
  }
  if (occ.bits_past_last_cu != 0) {
    problems.push_back("bits past the last CU");
  }
  if (occ.split_wgps != 0) {
    problems.push_back("split WGPs");
  }
  return problems;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const auto& problem : problems) {
    text += (text.empty() ? "" : "; ") + problem;
  }
  return text;
}

// Upstream's _getCarveoutStream mask: starts from zeros and sets k bits, top
// bits of the word first. `0xffffffff << 32` is undefined in C++; x86 masks
// the shift count to 5 bits, which gives 0xffffffff, modelled here. nullopt
// where upstream writes past the end of its vector.
std::optional<std::vector<uint32_t>> upstream_cu_mask(
    int64_t total_cus,
    int64_t k) {
  std::vector<uint32_t> mask((total_cus + kWordBits - 1) / kWordBits, 0u);
  const int64_t full_shifts = k / kWordBits;
  const int64_t remainder = k % kWordBits;
  if (full_shifts >= static_cast<int64_t>(mask.size())) {
    return std::nullopt;
  }
  for (int64_t i = 0; i < full_shifts; ++i) {
    mask[i] = 0xFFFFFFFFu;
  }
  const int64_t shift = (kWordBits - remainder) % kWordBits;  // x86: & 31
  mask[full_shifts] = 0xFFFFFFFFu << shift;
  return mask;
}

std::vector<uint32_t> cu_mask(const Part& part, int64_t k) {
  return at::cuda::build_cu_mask(part.total_cus, k, part.num_xcc,
                                 part.wgp_pairs);
}

std::vector<uint32_t> sm_carveout_mask(const Part& part, int64_t k) {
  return at::cuda::build_sm_carveout_cu_mask(part.topology(), k);
}

// The XCC-granular option's mask for a carveout of k SMs.
std::vector<uint32_t> xcc_round_mask(const Part& part, int64_t k) {
  const int64_t enabled = at::cuda::sm_carveout_enabled_cus(
      part.topology(), k, /*whole_xcc_rounds=*/true);
  return at::cuda::cu_mask_enabling(part.total_cus, enabled);
}

// The first line of the c10::Error that fn raises; "" when it raises none.
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    return message.substr(0, message.find('\n'));
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(CUMaskTest, SimulatorMapsBitsToXccs) {
  // Bits 0..7 land on XCCs 0..7; bits 0 and 8 both on XCC 0.
  std::vector<uint32_t> words(10, 0u);
  words[0] = 0xFF;
  EXPECT_EQ(simulate(words, kMI300X).per_xcc, std::vector<int64_t>(8, 1));
  words[0] = 0x101;
  EXPECT_EQ(simulate(words, kMI300X).per_xcc,
            (std::vector<int64_t>{2, 0, 0, 0, 0, 0, 0, 0}));
  // Bit 304 is past MI300X's last CU; bits 0 and 1 disagree on a WGP.
  words.assign(10, 0u);
  words[9] = 1u << 16;
  EXPECT_EQ(simulate(words, kMI300X).bits_past_last_cu, 1);
  EXPECT_EQ(simulate({0b01u, 0u}, kRX6800).split_wgps, 1);
}

TEST(CUMaskTest, ContractHoldsForEveryK) {
  for (const Part& part : kParts) {
    for (int64_t k = 0; k < part.total_cus; ++k) {
      EXPECT_EQ(joined(contract_violations(cu_mask(part, k), part, k)), "")
          << part.name << " k = " << k;
    }
  }
}

TEST(CUMaskTest, NoCarveoutEnablesEveryCu) {
  for (const Part& part : kParts) {
    EXPECT_EQ(simulate(cu_mask(part, 0), part).enabled(), part.total_cus)
        << part.name;
  }
}

TEST(CUMaskTest, WgpPartsRoundTheCarveoutUp) {
  for (const Part& part : {kRX7900, kRX6800}) {
    // Odd k frees k + 1 CUs (whole WGPs); the last k keeps one WGP.
    EXPECT_EQ(simulate(cu_mask(part, 3), part).enabled(), part.total_cus - 4)
        << part.name;
    EXPECT_EQ(simulate(cu_mask(part, part.total_cus - 1), part).enabled(),
              kCUsPerWGP)
        << part.name;
  }
}

TEST(CUMaskTest, Mi300xWords) {
  // k = 4: the lowest 300 bits, i.e. 9 full words and 12 bits.
  std::vector<uint32_t> expected(9, 0xFFFFFFFFu);
  expected.push_back(0xFFFu);
  EXPECT_EQ(cu_mask(kMI300X, 4), expected);
  // k = 16 (a multiple of 8): every XCC keeps exactly 36 CUs.
  EXPECT_EQ(simulate(cu_mask(kMI300X, 16), kMI300X).per_xcc,
            std::vector<int64_t>(8, 36));
}

TEST(CUMaskTest, SmCarveoutMaskForEveryK) {
  for (const Part& part : kSmParts) {
    for (int64_t k = 0; k < part.sms(); ++k) {
      EXPECT_EQ(joined(contract_violations(sm_carveout_mask(part, k), part, k,
                                           part.cus_per_sm)),
                "")
          << part.name << " k = " << k;
    }
  }
}

TEST(CUMaskTest, SmCountTargetHintCountsSms) {
  // The hipBLASLt hint is in SMs: SMs - k, and 0 (no hint) for k = 0.
  for (const Part& part : kSmParts) {
    for (int64_t k = 0; k < part.sms(); ++k) {
      const int64_t hint = at::cuda::sm_carveout_sm_count_target(
          part.total_cus, part.cus_per_sm, k, part.wgp_pairs);
      const int64_t enabled = expected_enabled(part, k, part.cus_per_sm);
      EXPECT_EQ(hint, k == 0 ? 0 : enabled / part.cus_per_sm)
          << part.name << " k = " << k;
    }
  }
}

TEST(CUMaskTest, WgpModeKCountsWgps) {
  // HIP reports 48 SMs (WGPs) for a 96-CU gfx1100: k = 8 frees 16 CUs, and
  // k = 47 leaves one WGP.
  EXPECT_EQ(simulate(sm_carveout_mask(kRX7900Wgp, 8), kRX7900Wgp).enabled(),
            80);
  const Occupancy last = simulate(sm_carveout_mask(kRX7900Wgp, 47), kRX7900Wgp);
  EXPECT_EQ(last.enabled(), 2);
  EXPECT_EQ(last.split_wgps, 0);
  const std::string error =
      error_of([] { sm_carveout_mask(kRX7900Wgp, 48); });
  EXPECT_TRUE(contains(error, "0 <= k < 48 ")) << error;
  EXPECT_TRUE(contains(error, "got k = 48")) << error;
}

TEST(CUMaskTest, WgpCountTakenAsCuCountIsWrong) {
  // Regression: taking multiProcessorCount (48 WGPs) as the CU count builds
  // a 48-bit mask for 96 CUs, so k = 8 runs on 40 CUs, not 80.
  std::vector<uint32_t> as_cus = at::cuda::build_cu_mask(48, 8, 1, true);
  as_cus.resize(3, 0u);
  EXPECT_EQ(simulate(as_cus, kRX7900).enabled(), 40);
  EXPECT_NE(joined(contract_violations(as_cus, kRX7900Wgp, 8, 2)), "");
}

TEST(CUMaskTest, CusPerSmMustDivideTheCuCount) {
  EXPECT_TRUE(contains(
      error_of([] { at::cuda::build_sm_carveout_cu_mask(96, 5, 4, 1, true); }),
      "cus_per_sm must be >= 1 and divide total_cus=96"));
}

// The XCC-granular option: whole rounds of num_xcc CUs free, at least k,
// fewer than k + num_xcc; one round stays enabled when none would be.
TEST(CUMaskTest, WholeXccRoundsKeepEveryXccEqual) {
  for (const Part& part : kMultiXccParts) {
    for (int64_t k = 0; k < part.sms(); ++k) {
      const Occupancy occ = simulate(xcc_round_mask(part, k), part);
      const int64_t rounds = (k + part.num_xcc - 1) / part.num_xcc;
      const int64_t wanted_free = std::min(rounds * part.num_xcc,
                                           part.total_cus - part.num_xcc);
      const auto [low, high] =
          std::minmax_element(occ.per_xcc.begin(), occ.per_xcc.end());
      EXPECT_EQ(*low, *high) << part.name << " k = " << k;
      EXPECT_EQ(part.total_cus - occ.enabled(), wanted_free)
          << part.name << " k = " << k;
      EXPECT_EQ(occ.bits_past_last_cu, 0) << part.name << " k = " << k;
    }
  }
}

TEST(CUMaskTest, WholeXccRoundsFreeAtLeastK) {
  for (const Part& part : kMultiXccParts) {
    const int64_t last_full = part.total_cus - part.num_xcc;
    for (int64_t k = 0; k < part.sms(); ++k) {
      const int64_t enabled = simulate(xcc_round_mask(part, k), part).enabled();
      if (k <= last_full) {
        EXPECT_GE(part.total_cus - enabled, k) << part.name << " k = " << k;
      } else {
        EXPECT_EQ(enabled, part.num_xcc) << part.name << " k = " << k;
      }
    }
  }
}

TEST(CUMaskTest, WholeXccRoundsOnMi300x) {
  // The lowest-bits rule leaves 38,38,38,38,37,37,37,37 at k = 4; whole
  // rounds free one CU per XCC.
  EXPECT_EQ(simulate(sm_carveout_mask(kMI300X, 4), kMI300X).per_xcc,
            (std::vector<int64_t>{38, 38, 38, 38, 37, 37, 37, 37}));
  EXPECT_EQ(simulate(xcc_round_mask(kMI300X, 4), kMI300X).per_xcc,
            std::vector<int64_t>(8, 37));
}

TEST(CUMaskTest, SingleXccPartsIgnoreWholeXccRounds) {
  for (const Part& part : {kMI250X, kRX7900, kRX7900Wgp}) {
    for (int64_t k = 0; k < part.sms(); ++k) {
      EXPECT_EQ(xcc_round_mask(part, k), sm_carveout_mask(part, k))
          << part.name << " k = " << k;
    }
  }
}

TEST(CUMaskTest, MaskEnablingRejectsZero) {
  EXPECT_TRUE(contains(
      error_of([] { at::cuda::cu_mask_enabling(304, 0); }),
      "enabled must be in [1, 304]"));
}

TEST(CUMaskTest, HipblasltHintFromRuntimeVersion) {
  // major * 100000 + minor * 100 + patch; 1.4.0 is the first with the
  // attribute, and a failed query (-1) means the mask alone.
  for (const int64_t version : {100400, 100401, 100500, 200000}) {
    EXPECT_TRUE(at::cuda::hipblaslt_takes_sm_count_target(version)) << version;
  }
  for (const int64_t version : {100399, 100300, 1000, 0, -1}) {
    EXPECT_FALSE(at::cuda::hipblaslt_takes_sm_count_target(version))
        << version;
  }
}

TEST(CUMaskTest, UpstreamFormulaFailsTheContract) {
  // Upstream enables k CUs (or k + 32), not CUs - k, so it can only meet
  // the contract where k == CUs - k.
  for (const Part& part : {kMI300X, kMI250X, kMI355X, kMI300A}) {
    int64_t failing = 0;
    for (int64_t k = 1; k < part.total_cus; ++k) {
      const auto upstream = upstream_cu_mask(part.total_cus, k);
      ASSERT_TRUE(upstream.has_value());
      if (contract_violations(*upstream, part, k).empty()) {
        EXPECT_EQ(2 * k, part.total_cus) << part.name << " k = " << k;
        continue;
      }
      ++failing;
      EXPECT_EQ(joined(contract_violations(cu_mask(part, k), part, k)), "")
          << part.name << " k = " << k;
    }
    EXPECT_GT(failing, part.total_cus - 3) << part.name;
  }
}

TEST(CUMaskTest, UpstreamEnablesKCus) {
  EXPECT_EQ(simulate(*upstream_cu_mask(304, 4), kMI300X).enabled(), 4);
  EXPECT_EQ(simulate(cu_mask(kMI300X, 4), kMI300X).enabled(), 300);
}

TEST(CUMaskTest, UpstreamShiftsBy32) {
  // k % 32 == 0: "<< 32" sets a whole extra word: 64 CUs for k = 32.
  const auto upstream = *upstream_cu_mask(304, 32);
  EXPECT_EQ(upstream[0], 0xFFFFFFFFu);
  EXPECT_EQ(upstream[1], 0xFFFFFFFFu);
  EXPECT_EQ(upstream[2], 0u);
  EXPECT_EQ(simulate(cu_mask(kMI300X, 32), kMI300X).enabled(), 272);
}

TEST(CUMaskTest, UpstreamSetsBitsPastTheLastCu) {
  // k = 300 sets the top 12 bits of word 9: bits 308..319 on a part whose
  // last CU is 303.
  EXPECT_EQ(simulate(*upstream_cu_mask(304, 300), kMI300X).bits_past_last_cu,
            12);
  EXPECT_EQ(simulate(cu_mask(kMI300X, 300), kMI300X).bits_past_last_cu, 0);
}

TEST(CUMaskTest, UpstreamWritesPastTheMask) {
  // Upstream never checks k: k = CUs on MI355X indexes word 8 of 8.
  EXPECT_FALSE(upstream_cu_mask(256, 256).has_value());
  EXPECT_TRUE(contains(error_of([] { cu_mask(kMI355X, 256); }),
                       "got k = 256"));
}

TEST(CUMaskTest, ErrorsNameTheArgument) {
  const auto message = [](int64_t total_cus, int64_t k, int64_t num_xcc,
                          bool wgp_pairs) {
    return error_of([&] {
      at::cuda::build_cu_mask(total_cus, k, num_xcc, wgp_pairs);
    });
  };
  EXPECT_EQ(message(304, 304, 8, false),
            "sm_carveout: the carveout must satisfy 0 <= k < 304 (the "
            "device's SM count), got k = 304");
  EXPECT_EQ(message(110, -1, 1, false),
            "sm_carveout: the carveout must satisfy 0 <= k < 110 (the "
            "device's SM count), got k = -1");
  EXPECT_EQ(message(0, 0, 1, false),
            "build_cu_mask: total_cus must be positive, got total_cus=0");
  EXPECT_EQ(message(304, 4, 0, false),
            "build_cu_mask: num_xcc must be in [1, 304] (at least one XCC, "
            "at most one per CU), got num_xcc=0");
  EXPECT_EQ(message(61, 4, 1, true),
            "build_cu_mask: with wgp_pairs, total_cus must be a multiple of "
            "2 (CUs come in WGP pairs), got total_cus=61");
  EXPECT_EQ(message(96, 4, 2, true),
            "build_cu_mask: with wgp_pairs, num_xcc must be 1 (no gfx10+ "
            "part has several XCCs), got num_xcc=2");
}
