#include "storage/nvme/wear_budget.h"

#include <gtest/gtest.h>

namespace kvtier {
namespace {

constexpr uint64_t kGB = 1'000'000'000;

TEST(WearBudgetTest, BudgetFollowsCapacityDwpdAndSafety) {
  FakeClock clock;
  // 3.84 TB, 1 DWPD, 5 years, 80% usable: 3.072 TB/day, TBW 7008 TB.
  WearBudget w({3840 * kGB, 1.0, 5, 0.8, 3600}, &clock);
  const WearReport r = w.Report();
  EXPECT_DOUBLE_EQ(r.budget_bytes_per_day, 3840.0 * kGB * 0.8);
  EXPECT_DOUBLE_EQ(r.tbw_bytes, 3840.0 * kGB * 365 * 5);
  EXPECT_DOUBLE_EQ(r.tokens_bytes, 3840.0 * kGB * 0.8 / 24);  // one hour of budget
  EXPECT_EQ(r.days_to_wear_out, -1);
}

TEST(WearBudgetTest, TokenBucketRefusesOverBudgetAndRefills) {
  FakeClock clock;
  // 86.4 GB/day x 1.0 = 1 MB/s; burst of 10 s = 10 MB.
  WearBudget w({86'400'000'000ull, 1.0, 5, 1.0, 10}, &clock);
  EXPECT_TRUE(w.TryConsume(6'000'000));
  EXPECT_TRUE(w.TryConsume(4'000'000));
  EXPECT_FALSE(w.TryConsume(1'000'000));  // bucket empty
  EXPECT_TRUE(w.Report().over_budget);
  clock.Advance(absl::Seconds(2));  // refills 2 MB
  EXPECT_TRUE(w.TryConsume(2'000'000));
  EXPECT_FALSE(w.TryConsume(1'000));
  clock.Advance(absl::Hours(1));  // capped at the burst
  EXPECT_DOUBLE_EQ(w.Report().tokens_bytes, 10'000'000);
}

TEST(WearBudgetTest, DaysToWearOutFromTheRecentWriteRate) {
  FakeClock clock;
  // A 2 TB consumer drive at 0.3 DWPD for 5 years: TBW 1095 TB.
  WearBudget w({2000 * kGB, 0.3, 5, 1.0, 3600}, &clock);
  // Write at 2 GB/s for ten minutes (the rate estimate settles).
  for (int i = 0; i < 600; ++i) {
    w.RecordWrite(2 * kGB);
    clock.Advance(absl::Seconds(1));
  }
  const WearReport r = w.Report();
  EXPECT_NEAR(r.write_rate_bytes_per_s, 2.0 * kGB, 0.05 * kGB);
  // (1095 TB - 1.2 TB) / (2 GB/s x 86400 s/day) is about 6.3 days.
  EXPECT_NEAR(r.days_to_wear_out, (1095e12 - 1.2e12) / (2e9 * 86400), 0.5);
  EXPECT_EQ(r.bytes_written, 600 * 2 * kGB);
  clock.Advance(absl::Hours(1));  // idle: the rate decays towards zero
  EXPECT_LT(w.Report().write_rate_bytes_per_s, 1e6);
}

}  // namespace
}  // namespace kvtier
