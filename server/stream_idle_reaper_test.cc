#include "server/stream_idle_reaper.h"

#include "gtest/gtest.h"

namespace kvtier {
namespace {

TEST(StreamIdleReaperTest, CancelsOnlyStreamsIdlePastTheLimit) {
  FakeClock clock;
  StreamIdleReaper reaper(absl::Seconds(10), &clock, /*run_thread=*/false);
  int a_cancels = 0, b_cancels = 0;
  std::unique_ptr<StreamIdleReaper::Watch> a = reaper.Track([&] { ++a_cancels; });
  std::unique_ptr<StreamIdleReaper::Watch> b = reaper.Track([&] { ++b_cancels; });
  clock.Advance(absl::Seconds(6));
  b->Touch();
  EXPECT_EQ(reaper.ReapOnce(), 0u);
  clock.Advance(absl::Seconds(4));  // a: exactly 10 s idle, not over
  EXPECT_EQ(reaper.ReapOnce(), 0u);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_EQ(reaper.ReapOnce(), 1u);
  EXPECT_EQ(a_cancels, 1);
  EXPECT_EQ(b_cancels, 0);
  // Cancelled once only, however long it stays.
  clock.Advance(absl::Seconds(60));
  EXPECT_EQ(reaper.ReapOnce(), 1u);  // b now
  EXPECT_EQ(a_cancels, 1);
  EXPECT_EQ(b_cancels, 1);
  EXPECT_EQ(reaper.cancelled(), 2u);
}

TEST(StreamIdleReaperTest, AForgottenWatchIsNeverCancelled) {
  FakeClock clock;
  StreamIdleReaper reaper(absl::Seconds(1), &clock, /*run_thread=*/false);
  int cancels = 0;
  reaper.Track([&] { ++cancels; }).reset();
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(reaper.ReapOnce(), 0u);
  EXPECT_EQ(cancels, 0);
}

TEST(StreamIdleReaperTest, ZeroLimitNeverCancels) {
  FakeClock clock;
  StreamIdleReaper reaper(absl::ZeroDuration(), &clock);
  int cancels = 0;
  std::unique_ptr<StreamIdleReaper::Watch> w = reaper.Track([&] { ++cancels; });
  w->Touch();
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(reaper.ReapOnce(), 0u);
  EXPECT_EQ(cancels, 0);
}

TEST(StreamIdleReaperTest, TheThreadCancelsOnItsOwn) {
  SystemClock clock;
  StreamIdleReaper reaper(absl::Milliseconds(40), &clock);
  std::atomic<int> cancels{0};
  std::unique_ptr<StreamIdleReaper::Watch> w = reaper.Track([&] { ++cancels; });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (cancels.load() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(cancels.load(), 1);
}

}  // namespace
}  // namespace kvtier
