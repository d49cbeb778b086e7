#include "server/async/call_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "base/mutex.h"

namespace kvtier {
namespace {

TEST(CallExecutorTest, RefusesThreadCountsOutsideItsRange) {
  EXPECT_EQ(CallExecutor::Create({.name = "x", .threads = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CallExecutor::Create({.name = "x", .threads = 1025}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CallExecutorTest, OneThreadRunsWorkInArrivalOrder) {
  auto e = CallExecutor::Create({.name = "fifo", .threads = 1});
  ASSERT_TRUE(e.ok()) << e.status();
  (*e)->Start();
  Mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*e)->Submit([&, i] {
      MutexLock lock(&mu);
      order.push_back(i);
    }));
  }
  (*e)->Stop();  // runs what was queued before joining
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(CallExecutorTest, NeverRunsMoreThanItsThreadsAtOnce) {
  auto e = CallExecutor::Create({.name = "bounded", .threads = 3});
  ASSERT_TRUE(e.ok()) << e.status();
  (*e)->Start();
  std::atomic<int> running{0}, most{0};
  Notification release;
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE((*e)->Submit([&] {
      const int now = running.fetch_add(1) + 1;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
      running.fetch_sub(1);
    }));
  }
  // Three start and wait; the other nine stay queued.
  for (int i = 0; i < 1000 && (*e)->queued() > 9; ++i) absl::SleepFor(absl::Milliseconds(5));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(running.load(), 3);
  EXPECT_EQ((*e)->queued(), 9u);
  release.Notify();
  (*e)->Stop();
  EXPECT_EQ(most.load(), 3);
  EXPECT_EQ(running.load(), 0);
}

TEST(CallExecutorTest, RefusesWorkOnceStoppedAndDestroysItUnrun) {
  auto e = CallExecutor::Create({.name = "stopped", .threads = 2});
  ASSERT_TRUE(e.ok()) << e.status();
  (*e)->Start();
  (*e)->Stop();
  (*e)->Stop();  // idempotent
  bool ran = false;
  auto token = std::make_shared<int>(0);
  std::weak_ptr<int> alive = token;
  EXPECT_FALSE((*e)->Submit([&ran, token = std::move(token)] { ran = true; }));
  EXPECT_FALSE(ran);
  EXPECT_TRUE(alive.expired());
}

TEST(CallLimitTest, HandsOutItsPlacesThenRefusesNamingTheMethod) {
  CallLimit limit("KvCache.Put", 2);
  absl::StatusOr<CallLimit::Ticket> a = limit.Enter();
  absl::StatusOr<CallLimit::Ticket> b = limit.Enter();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(limit.in_flight(), 2u);
  absl::StatusOr<CallLimit::Ticket> c = limit.Enter();
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("KvCache.Put: 2 calls already in flight"),
            absl::string_view::npos)
      << c.status();
  a->Reset();
  EXPECT_EQ(limit.in_flight(), 1u);
  absl::StatusOr<CallLimit::Ticket> d = limit.Enter();
  ASSERT_TRUE(d.ok());
  // A moved ticket holds one place, released once.
  CallLimit::Ticket moved = *std::move(d);
  EXPECT_EQ(limit.in_flight(), 2u);
  moved = CallLimit::Ticket();
  b->Reset();
  EXPECT_EQ(limit.in_flight(), 0u);
}

TEST(CallLimitTest, ConcurrentCallersNeverExceedTheLimit) {
  CallLimit limit("Admin.Evict", 5);
  std::atomic<int> over{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      // Each thread holds up to three places at once, so the threads
      // contend for the last places all the time.
      std::vector<CallLimit::Ticket> held;
      for (int i = 0; i < 4000; ++i) {
        absl::StatusOr<CallLimit::Ticket> ticket = limit.Enter();
        if (limit.in_flight() > 5) ++over;
        if (ticket.ok()) held.push_back(*std::move(ticket));
        if (held.size() == 3 || (!ticket.ok() && !held.empty())) held.clear();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(over.load(), 0);
  EXPECT_EQ(limit.in_flight(), 0u);
}

TEST(CallLimitsTest, EachMethodHasItsOwnLimit) {
  CallLimits limits("Peer", {"Hello", "Stage"}, 1);
  absl::StatusOr<CallLimit::Ticket> hello = limits.Of("Hello").Enter();
  ASSERT_TRUE(hello.ok());
  EXPECT_FALSE(limits.Of("Hello").Enter().ok());
  EXPECT_TRUE(limits.Of("Stage").Enter().ok());
}

}  // namespace
}  // namespace kvtier
