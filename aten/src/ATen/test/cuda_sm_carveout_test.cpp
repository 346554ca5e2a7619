#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/cuda/SMCarveout.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <string>

// The SM-carveout policy (ATen/cuda/SMCarveout.h): pure host arithmetic on
// the context's carveout, so these tests need no GPU.

namespace {

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

// Sets the context's carveout for one test, restores it after.
class CarveoutSetting {
 public:
  explicit CarveoutSetting(std::optional<int32_t> k)
      : previous_(at::globalContext()._SMCarveout_EXPERIMENTAL()) {
    at::globalContext()._setSMCarveout_EXPERIMENTAL(k);
  }
  ~CarveoutSetting() {
    at::globalContext()._setSMCarveout_EXPERIMENTAL(previous_);
  }
  CarveoutSetting(const CarveoutSetting&) = delete;
  CarveoutSetting& operator=(const CarveoutSetting&) = delete;

 private:
  std::optional<int32_t> previous_;
};

}  // namespace

TEST(SMCarveoutTest, SmCountAfterCarveout) {
  struct Case {
    int64_t total_sms;
    int64_t k;
    int64_t expected;
  };
  for (const Case& c : {Case{132, 0, 132}, Case{132, 8, 124},
                        Case{132, 66, 66}, Case{132, 131, 1},
                        Case{78, 32, 46}, Case{1, 0, 1}}) {
    EXPECT_EQ(at::cuda::sm_count_after_carveout(c.total_sms, c.k), c.expected)
        << "total_sms = " << c.total_sms << ", k = " << c.k;
  }
}

TEST(SMCarveoutTest, OutOfRangeCarveoutNamesTheLimit) {
  EXPECT_EQ(
      error_of([] { at::cuda::sm_count_after_carveout(132, 132); }),
      "sm_carveout: the carveout must satisfy 0 <= k < 132 (the device's SM "
      "count), got k = 132");
  EXPECT_EQ(
      error_of([] { at::cuda::sm_count_after_carveout(132, -1); }),
      "sm_carveout: the carveout must satisfy 0 <= k < 132 (the device's SM "
      "count), got k = -1");
  EXPECT_EQ(
      error_of([] { at::cuda::sm_count_after_carveout(0, 0); }),
      "sm_carveout: the device reports 0 SMs");
  EXPECT_EQ(
      error_of([] { at::cuda::check_sm_carveout(-3); }),
      "sm_carveout: the carveout must satisfy k >= 0, got k = -3");
  EXPECT_NO_THROW(at::cuda::check_sm_carveout(0));
  EXPECT_NO_THROW(at::cuda::check_sm_carveout(1000));
}

TEST(SMCarveoutTest, BlasSmCountTargetFollowsContext) {
  {
    CarveoutSetting unset(std::nullopt);
    EXPECT_EQ(at::cuda::requested_sm_carveout(), 0);
    EXPECT_EQ(at::cuda::blas_sm_count_target(132), 0);  // every SM
    EXPECT_EQ(at::cuda::effective_sm_count(132), 132);
  }
  {
    CarveoutSetting zero(0);
    EXPECT_EQ(at::cuda::blas_sm_count_target(132), 0);
  }
  {
    CarveoutSetting sixteen(16);
    EXPECT_EQ(at::cuda::requested_sm_carveout(), 16);
    EXPECT_EQ(at::cuda::blas_sm_count_target(132), 116);
    EXPECT_EQ(at::cuda::effective_sm_count(132), 116);
  }
  {
    CarveoutSetting too_many(132);
    EXPECT_THROW(at::cuda::blas_sm_count_target(132), c10::Error);
    EXPECT_THROW(at::cuda::effective_sm_count(132), c10::Error);
  }
}

// Every k on several (SMs, smallest partition, alignment) granularities:
// the partition is SMs - k rounded down to the alignment, never above the
// budget, never wasting a whole alignment step, and an error naming k when
// it would fall below the smallest partition.
TEST(SMCarveoutTest, GreenContextSmCountEveryK) {
  struct Granularity {
    int64_t total_sms;
    int64_t min_partition;
    int64_t alignment;
  };
  for (const Granularity& g :
       {Granularity{132, 8, 8}, Granularity{114, 8, 8},
        Granularity{144, 8, 8}, Granularity{108, 4, 2},
        Granularity{80, 2, 2}, Granularity{132, 8, 2},
        Granularity{132, 16, 8}}) {
    EXPECT_EQ(
        at::cuda::green_context_sm_count(
            g.total_sms, 0, g.min_partition, g.alignment),
        g.total_sms);
    for (int64_t k = 1; k < g.total_sms; ++k) {
      const int64_t budget = g.total_sms - k;
      const int64_t expected = budget / g.alignment * g.alignment;
      const auto partition = [&] {
        return at::cuda::green_context_sm_count(
            g.total_sms, k, g.min_partition, g.alignment);
      };
      if (expected < g.min_partition) {
        const std::string prefix = "sm_carveout: k = " + std::to_string(k) +
            " leaves " + std::to_string(budget) + " of " +
            std::to_string(g.total_sms) + " SMs";
        EXPECT_EQ(error_of(partition).rfind(prefix, 0), 0u)
            << "total_sms = " << g.total_sms << ", k = " << k;
        continue;
      }
      const int64_t got = partition();
      EXPECT_EQ(got, expected) << "total_sms = " << g.total_sms
                               << ", k = " << k;
      EXPECT_LE(got, budget);
      EXPECT_GE(got, g.min_partition);
      EXPECT_EQ(got % g.alignment, 0);
      EXPECT_LT(budget - got, g.alignment);
    }
  }
}

TEST(SMCarveoutTest, GreenContextSmCountErrors) {
  EXPECT_EQ(
      error_of([] { at::cuda::green_context_sm_count(132, 125, 8, 8); }),
      "sm_carveout: k = 125 leaves 7 of 132 SMs, fewer than the smallest "
      "green-context partition on this device (8 SMs, in multiples of 8), "
      "which confines GEMMs whose kernels are not persistent (float32, "
      "float64, complex); use k <= 124");
  EXPECT_EQ(at::cuda::green_context_sm_count(132, 124, 8, 8), 8);
  EXPECT_EQ(
      error_of([] { at::cuda::green_context_sm_count(132, 132, 8, 8); })
          .rfind("sm_carveout: the carveout must satisfy 0 <= k < 132", 0),
      0u);
  EXPECT_THROW(at::cuda::green_context_sm_count(132, -1, 8, 8), c10::Error);
  EXPECT_EQ(
      error_of([] { at::cuda::green_context_sm_count(132, 8, 8, 0); }),
      "sm_carveout: the green-context granularity must be positive, got "
      "min_partition = 8, alignment = 0");
  // min_partition 5 with alignment 4: the smallest partition is 8.
  const std::string odd =
      error_of([] { at::cuda::green_context_sm_count(32, 25, 5, 4); });
  EXPECT_NE(odd.find("(8 SMs, in multiples of 4)"), std::string::npos) << odd;
  EXPECT_NE(odd.find("use k <= 24"), std::string::npos) << odd;
  // A device no partition fits.
  const std::string none =
      error_of([] { at::cuda::green_context_sm_count(6, 1, 8, 8); });
  EXPECT_NE(none.find("this device cannot be partitioned"), std::string::npos)
      << none;
}
