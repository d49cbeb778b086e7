#include "events/block_event_bus.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "storage/block_cache.h"
#include "testing/block_event_mirror.h"
#include "testing/host_tier_fixture.h"  // Key
#include "testing/small_cache.h"

namespace kvtier {
namespace {

constexpr uint64_t kKiB = 1024;

// A cache of 64 blocks of 64 KiB reporting into a bus.
class BlockEventBusTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(BlockEventBus::Options{}); }
  void TearDown() override {
    if (cache_ != nullptr) cache_->SetEventSink(nullptr);
  }

  void Make(BlockEventBus::Options options) {
    if (cache_ != nullptr) cache_->SetEventSink(nullptr);
    bus_.reset();
    cache_.reset();
    cache_ = SmallCache(&clock_);
    ns_ = OpenSmallNamespace(*cache_, "model-a", 128);  // 64 KiB blocks: 64 fit
    other_ = OpenSmallNamespace(*cache_, "model-b", 128);
    bus_ = AttachEventBus(cache_.get(), options);
  }

  absl::Status Put(const NamespaceId& ns, const std::string& prefix, int n,
                   const std::string& first_parent = "") {
    absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> batch = cache_->BeginPut(ns);
    if (!batch.ok()) return batch.status();
    std::string parent = first_parent;
    const std::vector<uint8_t> bytes(64 * kKiB, 7);
    for (int i = 0; i < n; ++i) {
      const std::string k = absl::StrCat(prefix, i);
      absl::Status s =
          (*batch)->StartBlock(Key(k), parent.empty() ? BlockKey() : Key(parent), bytes.size());
      if (s.ok()) s = (*batch)->Append(bytes);
      if (!s.ok()) return s;
      parent = k;
    }
    return (*batch)->Commit().status();
  }

  // Everything the subscription receives within a few seconds, until it
  // has `want` events.
  static std::vector<BlockEvent> Drain(BlockEventBus::Subscription& sub, size_t want) {
    std::vector<BlockEvent> out;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (out.size() < want && absl::Now() < deadline) {
      sub.Wait(absl::Milliseconds(20));
      for (BlockEvent& e : sub.Take(1000)) out.push_back(std::move(e));
    }
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<BlockCache> cache_;
  std::unique_ptr<BlockEventBus> bus_;
  NamespaceId ns_;
  NamespaceId other_;
};

TEST_F(BlockEventBusTest, SubscriberSeesLaterEventsInOrder) {
  ASSERT_TRUE(Put(ns_, "early", 2).ok());  // before it subscribed: not seen
  auto sub = bus_->Subscribe(std::nullopt, /*snapshot=*/false);
  ASSERT_TRUE(Put(ns_, "a", 3).ok());
  const std::vector<BlockEvent> got = Drain(*sub, 3);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].kind, BlockEvent::Kind::kStored);
    EXPECT_EQ(got[i].medium, Medium::kHost);
    EXPECT_EQ(got[i].key, Key(absl::StrCat("a", i)));
    EXPECT_EQ(got[i].size, 64 * kKiB);
  }
  EXPECT_EQ(got[0].parent, BlockKey());
  EXPECT_EQ(got[2].parent, Key("a1"));
  EXPECT_TRUE(sub->Take(10).empty());
  EXPECT_EQ(bus_->events_reported(), 5u);
}

TEST_F(BlockEventBusTest, SnapshotThenChangesMirrorTheContentsUnderConcurrentWrites) {
  ASSERT_TRUE(Put(ns_, "base", 10).ok());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // Keeps storing and (the tier holds 64 blocks) evicting meanwhile.
    for (int round = 0; !stop.load(); ++round) {
      ASSERT_TRUE(Put(ns_, absl::StrCat("w", round, "-"), 8).ok());
    }
  });
  absl::SleepFor(absl::Milliseconds(20));
  auto sub = bus_->Subscribe(std::nullopt, /*snapshot=*/true);
  absl::SleepFor(absl::Milliseconds(100));
  stop.store(true);
  writer.join();
  // Until the dispatcher has handed over everything reported (the cache
  // no longer changes).
  BlockEventMirror mirror;
  const auto contents = SnapshotContents(*cache_);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && mirror.contents() != contents) {
    sub->Wait(absl::Milliseconds(50));
    mirror.ApplyAll(sub->Take(100000));
  }
  EXPECT_FALSE(sub->lost());
  EXPECT_EQ(mirror.errors(), std::vector<std::string>());
  EXPECT_EQ(mirror.contents(), SnapshotContents(*cache_));
  EXPECT_GT(mirror.removed(Medium::kHost), 0u);  // evictions were seen
}

// The dispatcher sleeps until the first event after its last pass wakes
// it, not on the lock the cache takes for every event (which woke it once
// per stored block). With the backstop beyond every wait here, every wave
// of events arrives (within Drain's 10 s) only if its first event woke the
// dispatcher, and the bus's destruction returns within 30 s only if it
// wakes it too.
TEST_F(BlockEventBusTest, EachWaveOfEventsWakesTheDispatcher) {
  BlockEventBus::Options options;
  options.backstop = absl::Seconds(60);
  Make(options);
  auto sub = bus_->Subscribe(std::nullopt, /*snapshot=*/false);
  for (int wave = 0; wave < 10; ++wave) {
    const int n = 1 + wave % 3;
    ASSERT_TRUE(Put(ns_, absl::StrCat("w", wave, "-"), n).ok());
    const std::vector<BlockEvent> got = Drain(*sub, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n)) << "wave " << wave;
    EXPECT_EQ(got.back().key, Key(absl::StrCat("w", wave, "-", n - 1)));
  }
  const absl::Time t0 = absl::Now();
  cache_->SetEventSink(nullptr);
  bus_.reset();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(30));
  EXPECT_TRUE(sub->lost());
}

TEST_F(BlockEventBusTest, NamespaceFilter) {
  auto sub = bus_->Subscribe(other_, /*snapshot=*/false);
  ASSERT_TRUE(Put(ns_, "a", 2).ok());
  ASSERT_TRUE(Put(other_, "b", 1).ok());
  const std::vector<BlockEvent> got = Drain(*sub, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].ns, other_);
  EXPECT_EQ(got[0].key, Key("b0"));
}

TEST_F(BlockEventBusTest, SlowSubscriberIsLostAndCanResubscribe) {
  Make(BlockEventBus::Options{.subscriber_capacity = 4, .max_pending = 1 << 20});
  auto wakes = std::make_shared<std::atomic<int>>(0);  // outlives any late wake-up
  auto slow = bus_->Subscribe(std::nullopt, false, [wakes] { wakes->fetch_add(1); });
  ASSERT_TRUE(Put(ns_, "a", 10).ok());  // 10 events > 4
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((!slow->lost() || bus_->subscribers_lost() == 0 || wakes->load() == 0) &&
         absl::Now() < deadline) {
    slow->Wait(absl::Milliseconds(20));
  }
  EXPECT_TRUE(slow->lost());
  EXPECT_TRUE(slow->Take(100).empty());  // its queue was dropped
  EXPECT_GE(wakes->load(), 1);
  EXPECT_EQ(bus_->subscribers_lost(), 1u);
  // A snapshot larger than the capacity is still delivered whole.
  auto again = bus_->Subscribe(std::nullopt, true);
  EXPECT_EQ(again->snapshot_events(), 10u);
  EXPECT_EQ(again->Take(100).size(), 10u);
  EXPECT_FALSE(again->lost());
}

TEST_F(BlockEventBusTest, DispatcherFallingBehindLosesEverySubscriberAndKeepsNothing) {
  Make(BlockEventBus::Options{.subscriber_capacity = 1 << 16, .max_pending = 4});
  // Shared with the dispatcher's wake-ups, which may run after this test's
  // own checks.
  struct Hold {
    Notification release;
    std::atomic<int> wakes{0};
  };
  auto hold = std::make_shared<Hold>();
  // Never leave the dispatcher held (the bus joins it when destroyed).
  absl::Cleanup unhold = [hold] {
    if (!hold->release.HasBeenNotified()) hold->release.Notify();
  };
  // The first wake-up holds the dispatcher while the cache reports on.
  auto sub = bus_->Subscribe(std::nullopt, false, [hold] {
    if (hold->wakes.fetch_add(1) == 0) hold->release.WaitForNotification();
  });
  ASSERT_TRUE(Put(ns_, "a", 1).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (hold->wakes.load() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(hold->wakes.load(), 1);
  ASSERT_TRUE(Put(ns_, "b", 10).ok());  // 10 pending > 4: dropped, not queued
  hold->release.Notify();
  while ((!sub->lost() || hold->wakes.load() < 2) && absl::Now() < deadline) {
    sub->Wait(absl::Milliseconds(20));
  }
  EXPECT_TRUE(sub->lost());
  EXPECT_EQ(hold->wakes.load(), 2);  // woken once more: to learn it is lost
  EXPECT_EQ(bus_->subscribers_lost(), 1u);
  EXPECT_TRUE(sub->Take(100).empty());
}

TEST_F(BlockEventBusTest, CancelledAndDestroyedSubscriptionsAreForgotten) {
  auto a = bus_->Subscribe(std::nullopt, false);
  auto b = bus_->Subscribe(std::nullopt, false);
  EXPECT_EQ(bus_->subscribers(), 2u);
  a->Cancel();
  b.reset();
  ASSERT_TRUE(Put(ns_, "a", 1).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (bus_->subscribers() != 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(bus_->subscribers(), 0u);
  EXPECT_EQ(bus_->subscribers_lost(), 0u);  // cancelling is not falling behind
  EXPECT_TRUE(a->Take(10).empty());
}

TEST_F(BlockEventBusTest, SubscriptionOutlivesTheBusAsLost) {
  auto sub = bus_->Subscribe(std::nullopt, false);
  cache_->SetEventSink(nullptr);
  bus_.reset();
  EXPECT_TRUE(sub->lost());
  EXPECT_TRUE(sub->Wait(absl::Milliseconds(1)));
}

}  // namespace
}  // namespace kvtier
