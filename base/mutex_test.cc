#include "base/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"

namespace kvtier {
namespace {

TEST(MutexTest, GuardsACounterAcrossThreads) {
  Mutex mu;
  int count = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++count;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  MutexLock lock(&mu);
  EXPECT_EQ(count, 40000);
}

TEST(MutexTest, AwaitWakesWhenAnotherThreadChangesTheStateWithoutSignalling) {
  Mutex mu;
  bool ready = false;
  int value = 0;
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    MutexLock lock(&mu);
    value = 7;
    ready = true;  // no signal: the Unlock re-evaluates the awaited condition
  });
  {
    MutexLock lock(&mu);
    mu.Await(Condition(&ready));
    EXPECT_EQ(value, 7);
  }
  writer.join();
}

// A thread that changes the state and then blocks in Await of its own
// releases the lock without an Unlock: the other waiter must still wake.
// (It did not, and this hung, before Await signalled on blocking.)
TEST(MutexTest, AwaitWakesWhenTheChangerThenBlocksInAwait) {
  Mutex mu;
  bool first_done = false, second_done = false;
  // Evaluated with mu held; marks that the main thread is inside Await. An
  // atomic the changer polls without mu: an Unlock of mu would wake the main
  // thread and so hide the missing wake-up this test is about.
  std::atomic<bool> main_waiting{false};
  auto first = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    main_waiting.store(true);
    return first_done;
  };
  bool changer_woke = false;
  std::thread changer([&] {
    while (!main_waiting.load()) absl::SleepFor(absl::Milliseconds(1));
    // Taking mu waits until the main thread's Await has released it to block.
    MutexLock lock(&mu);
    first_done = true;
    // Without the fix both threads sleep here: the timeout ends the wait
    // and the test fails instead of hanging.
    changer_woke = mu.AwaitWithTimeout(Condition(&second_done), absl::Seconds(10));
  });
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(Condition(&first), absl::Seconds(20)));
    second_done = true;
  }
  changer.join();
  EXPECT_TRUE(changer_woke);
}

TEST(MutexTest, AwaitTakesACallable) {
  Mutex mu;
  int n = 0;
  std::thread bumper([&] {
    for (int i = 0; i < 5; ++i) {
      MutexLock lock(&mu);
      ++n;
    }
  });
  auto five = [&] { return n == 5; };
  {
    MutexLock lock(&mu);
    mu.Await(Condition(&five));
    EXPECT_EQ(n, 5);
  }
  bumper.join();
}

TEST(MutexTest, AwaitWithTimeoutReportsWhetherTheConditionHeld) {
  Mutex mu;
  bool never = false;
  MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(mu.AwaitWithTimeout(Condition(&never), absl::Milliseconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(29));
  bool already = true;
  EXPECT_TRUE(mu.AwaitWithTimeout(Condition(&already), absl::ZeroDuration()));
  EXPECT_FALSE(mu.AwaitWithDeadline(Condition(&never), absl::Now() - absl::Seconds(1)));
  EXPECT_TRUE(mu.AwaitWithDeadline(Condition(&already), absl::InfiniteFuture()));
}

TEST(MutexTest, TryLockFailsWhileHeld) {
  Mutex mu;
  mu.Lock();
  std::atomic<bool> got{true};
  std::thread other([&] {
    if (mu.TryLock()) {
      mu.Unlock();
    } else {
      got = false;
    }
  });
  other.join();
  EXPECT_FALSE(got.load());
  mu.Unlock();
  const bool locked = mu.TryLock();
  EXPECT_TRUE(locked);
  if (locked) mu.Unlock();
}

TEST(NotificationTest, WaitersReturnOnceNotified) {
  Notification done;
  EXPECT_FALSE(done.HasBeenNotified());
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(10)));
  std::thread notifier([&] {
    absl::SleepFor(absl::Milliseconds(10));
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_TRUE(done.HasBeenNotified());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::ZeroDuration()));
  notifier.join();
}

// The pattern CopyEngine::CopySync relies on: the waiter destroys the
// Notification as soon as it returns, while the notifier may still be inside
// Notify(). Repeated so a use after free would show (ASan, TSan).
TEST(NotificationTest, TheWaiterMayDestroyItRightAfterWaking) {
  for (int i = 0; i < 200; ++i) {
    auto done = std::make_unique<Notification>();
    std::thread notifier([n = done.get()] { n->Notify(); });
    done->WaitForNotification();
    done.reset();
    notifier.join();
  }
}

}  // namespace
}  // namespace kvtier
