#include "storage/nvme/write_policy.h"

#include "gtest/gtest.h"

namespace kvtier {
namespace {

TEST(WritePolicyTest, ParsesEachNameAndRoundTrips) {
  for (WritePolicy p :
       {WritePolicy::kWriteBack, WritePolicy::kWriteThrough, WritePolicy::kWriteThroughAfterHits}) {
    absl::StatusOr<WritePolicy> parsed = ParseWritePolicy(WritePolicyName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(WritePolicyName(WritePolicy::kWriteBack), "write_back");
  EXPECT_EQ(WritePolicyName(WritePolicy::kWriteThrough), "write_through");
  EXPECT_EQ(WritePolicyName(WritePolicy::kWriteThroughAfterHits), "write_through_after_hits");
}

TEST(WritePolicyTest, RejectsUnknownNames) {
  for (absl::string_view bad : {"", "Write_Back", "write-back", "write_through "}) {
    absl::StatusOr<WritePolicy> parsed = ParseWritePolicy(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ParseWritePolicy("lazy").status().message(),
            "nvme write policy 'lazy' is not one of write_back, write_through, "
            "write_through_after_hits");
}

TEST(DecideDemotionTest, WriteBackWritesOnlyUnderPressureWithEnoughUses) {
  DemotionRule rule{.policy = WritePolicy::kWriteBack, .admit_min_uses = 3};
  EXPECT_EQ(DecideDemotion(rule, {.uses = 3}, /*host_pressure=*/true), DemotionVerdict::kWrite);
  EXPECT_EQ(DecideDemotion(rule, {.uses = 2}, true), DemotionVerdict::kRefusedFilter);
  EXPECT_EQ(DecideDemotion(rule, {.uses = 3}, false), DemotionVerdict::kSkip);
  EXPECT_EQ(DecideDemotion(rule, {.uses = 9}, false), DemotionVerdict::kSkip);
}

TEST(DecideDemotionTest, WriteThroughWritesEveryBlock) {
  DemotionRule rule{.policy = WritePolicy::kWriteThrough, .admit_min_uses = 5};
  EXPECT_EQ(DecideDemotion(rule, {.uses = 1}, false), DemotionVerdict::kWrite);
  EXPECT_EQ(DecideDemotion(rule, {.uses = 1}, true), DemotionVerdict::kWrite);
}

TEST(DecideDemotionTest, WriteThroughAfterHitsCountsUsesNotPressure) {
  DemotionRule rule{.policy = WritePolicy::kWriteThroughAfterHits, .write_through_hits = 2};
  EXPECT_EQ(DecideDemotion(rule, {.uses = 2}, false), DemotionVerdict::kWrite);
  EXPECT_EQ(DecideDemotion(rule, {.uses = 1}, false), DemotionVerdict::kSkip);
  EXPECT_EQ(DecideDemotion(rule, {.uses = 1}, true), DemotionVerdict::kRefusedFilter);
}

TEST(DecideDemotionTest, NamespaceRefusalComesFirst) {
  for (WritePolicy p :
       {WritePolicy::kWriteBack, WritePolicy::kWriteThrough, WritePolicy::kWriteThroughAfterHits}) {
    DemotionRule rule{.policy = p};
    EXPECT_EQ(DecideDemotion(rule, {.uses = 100, .namespace_admits = false}, true),
              DemotionVerdict::kRefusedValue);
    EXPECT_EQ(DecideDemotion(rule, {.uses = 100, .namespace_admits = false}, false),
              DemotionVerdict::kRefusedValue);
  }
}

TEST(PlanDemotionPassTest, WriteBackRunsOnlyAboveTheHighWatermark) {
  DemotionRule rule{
      .policy = WritePolicy::kWriteBack, .host_high_watermark = 0.5, .host_low_watermark = 0.25};
  DemotionPass idle = PlanDemotionPass(rule, 500, 1000);  // exactly at high: no pressure
  EXPECT_FALSE(idle.host_pressure);
  EXPECT_FALSE(idle.run);
  DemotionPass busy = PlanDemotionPass(rule, 600, 1000);
  EXPECT_TRUE(busy.host_pressure);
  EXPECT_TRUE(busy.run);
  EXPECT_DOUBLE_EQ(busy.bytes_needed, 350.0);  // down to 250 bytes
}

TEST(PlanDemotionPassTest, WriteThroughRunsWithoutBound) {
  DemotionRule rule{
      .policy = WritePolicy::kWriteThrough, .host_high_watermark = 0.5, .host_low_watermark = 0.25};
  DemotionPass pass = PlanDemotionPass(rule, 0, 1000);
  EXPECT_FALSE(pass.host_pressure);
  EXPECT_TRUE(pass.run);
  EXPECT_EQ(pass.bytes_needed, 1e300);
  EXPECT_DOUBLE_EQ(PlanDemotionPass(rule, 900, 1000).bytes_needed, 650.0);
}

}  // namespace
}  // namespace kvtier
