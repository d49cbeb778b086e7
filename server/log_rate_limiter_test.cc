#include "server/log_rate_limiter.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

TEST(LogRateLimiterTest, OneLinePerIntervalAndReasonWithTheSuppressedCount) {
  FakeClock clock;
  LogRateLimiter limiter(absl::Seconds(10), &clock);
  LogRateLimiter::Verdict v = limiter.Record("unknown token");
  EXPECT_TRUE(v.log);
  EXPECT_EQ(v.suppressed, 0u);
  for (int i = 0; i < 999; ++i) {
    clock.Advance(absl::Milliseconds(9));  // 999 * 9 ms < 10 s
    EXPECT_FALSE(limiter.Record("unknown token").log) << i;
  }
  // Another reason is not held back by the first.
  v = limiter.Record("no credentials");
  EXPECT_TRUE(v.log);
  EXPECT_EQ(v.suppressed, 0u);
  clock.Advance(absl::Seconds(10) - absl::Milliseconds(999 * 9));  // exactly 10 s after the first
  v = limiter.Record("unknown token");
  EXPECT_TRUE(v.log);
  EXPECT_EQ(v.suppressed, 999u);
  // The count restarts after a line is written.
  clock.Advance(absl::Seconds(1));
  EXPECT_FALSE(limiter.Record("unknown token").log);
  clock.Advance(absl::Seconds(9));
  v = limiter.Record("unknown token");
  EXPECT_TRUE(v.log);
  EXPECT_EQ(v.suppressed, 1u);
}

TEST(LogRateLimiterTest, CountsEveryEventLoggedOrNot) {
  FakeClock clock;
  LogRateLimiter limiter(absl::Seconds(10), &clock);
  for (int i = 0; i < 250; ++i) limiter.Record("a");
  for (int i = 0; i < 3; ++i) limiter.Record("b");
  EXPECT_EQ(limiter.Count("a"), 250u);
  EXPECT_EQ(limiter.Count("b"), 3u);
  EXPECT_EQ(limiter.Count("never"), 0u);
}

TEST(LogRateLimiterTest, DistinctReasonsAreBounded) {
  FakeClock clock;
  LogRateLimiter limiter(absl::Seconds(10), &clock, /*max_reasons=*/4);
  // Three reasons of their own; every further one shares kOtherReason.
  for (int i = 0; i < 10; ++i) {
    const LogRateLimiter::Verdict v = limiter.Record(absl::StrCat("reason ", i));
    EXPECT_EQ(v.log, i <= 3) << i;  // reason 3 is the first line of "other"
  }
  EXPECT_EQ(limiter.Count("reason 2"), 1u);
  EXPECT_EQ(limiter.Count("reason 3"), 0u);
  EXPECT_EQ(limiter.Count(LogRateLimiter::kOtherReason), 7u);
  // A reason seen before keeps its own entry.
  clock.Advance(absl::Seconds(10));
  EXPECT_TRUE(limiter.Record("reason 0").log);
  EXPECT_EQ(limiter.Count("reason 0"), 2u);
  const LogRateLimiter::Verdict other = limiter.Record("reason 9");
  EXPECT_TRUE(other.log);
  EXPECT_EQ(other.suppressed, 6u);
}

}  // namespace
}  // namespace kvtier
