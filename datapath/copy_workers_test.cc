#include "datapath/copy_workers.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace kvtier {
namespace {

// Pins the calling thread to `cpu` for its lifetime, then restores its mask.
class PinnedTo {
 public:
  explicit PinnedTo(int cpu) {
    sched_getaffinity(0, sizeof(saved_), &saved_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ok_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedTo() { sched_setaffinity(0, sizeof(saved_), &saved_); }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

// The CPUs the calling thread may use.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Runs one OnTwoThreads call and expects part(0) then part(1), both on the
// calling thread.
void ExpectBothHalvesRunHereInOrder(CopyWorkers& workers) {
  std::vector<size_t> order;
  std::vector<std::thread::id> ran_on;
  workers.OnTwoThreads([&](size_t part) {
    order.push_back(part);
    ran_on.push_back(std::this_thread::get_id());
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(ran_on, (std::vector<std::thread::id>(2, std::this_thread::get_id())));
}

TEST(CopyWorkersTest, RefusesAThreadCountOutOfRange) {
  EXPECT_EQ(CopyWorkers::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CopyWorkers::Create(257).status().code(), absl::StatusCode::kInvalidArgument);
}

// The second half runs on a worker, at the same time as the first: each
// half waits for the other to have started, which one thread doing both in
// turn could never satisfy.
TEST(CopyWorkersTest, TheHalvesRunAtOnceOnTwoThreads) {
  if (AllowedCpus().size() < 2) GTEST_SKIP() << "needs 2 CPUs: on one both halves run inline";
  auto workers = CopyWorkers::Create(1);
  ASSERT_TRUE(workers.ok()) << workers.status();
  for (int round = 0; round < 50; ++round) {
    Mutex mu;
    bool started[2] = {false, false};
    std::thread::id ran_on[2];
    (*workers)->OnTwoThreads([&](size_t part) {
      MutexLock lock(&mu);
      started[part] = true;
      ran_on[part] = std::this_thread::get_id();
      // Each round hands over again: the worker is idle once a call returns.
      EXPECT_TRUE(mu.AwaitWithTimeout(Condition(&started[1 - part]), absl::Seconds(10)));
    });
    EXPECT_TRUE(started[0] && started[1]);
    EXPECT_EQ(ran_on[0], std::this_thread::get_id());
    EXPECT_NE(ran_on[1], std::this_thread::get_id());
  }
}

// With every worker busy, a call does both halves itself (in order) instead
// of waiting for a worker; the busy worker's call is unaffected.
TEST(CopyWorkersTest, WithNoWorkerIdleBothHalvesRunOnTheCaller) {
  if (AllowedCpus().size() < 2) GTEST_SKIP() << "needs 2 CPUs: on one both halves run inline";
  auto workers = CopyWorkers::Create(1);
  ASSERT_TRUE(workers.ok()) << workers.status();
  Mutex mu;
  bool worker_busy = false, release = false;
  std::thread first([&] {
    (*workers)->OnTwoThreads([&](size_t part) {
      if (part == 0) return;
      MutexLock lock(&mu);
      worker_busy = true;
      mu.Await(Condition(&release));
    });
  });
  {
    MutexLock lock(&mu);
    mu.Await(Condition(&worker_busy));
  }
  ExpectBothHalvesRunHereInOrder(**workers);
  {
    MutexLock lock(&mu);
    release = true;
  }
  first.join();
}

// Many callers at once, more than there are workers: every half of every
// call runs exactly once, and the calls return only after both halves.
TEST(CopyWorkersTest, ConcurrentCallersEachGetBothHalvesOnce) {
  auto workers = CopyWorkers::Create(2);
  ASSERT_TRUE(workers.ok()) << workers.status();
  constexpr int kCallers = 6, kCalls = 200;
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        std::atomic<int> runs[2] = {0, 0};
        (*workers)->OnTwoThreads([&](size_t part) { runs[part].fetch_add(1); });
        if (runs[0].load() != 1 || runs[1].load() != 1) bad.fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ((*workers)->threads(), 2);
}

// The worker is kept off the caller's CPU (the scheduler would otherwise
// queue it there behind the caller): its mask is the caller's but one CPU,
// the one the caller was on. A caller seen on the same CPU before, during and
// after the call did not move, so that is the CPU left out.
TEST(CopyWorkersTest, TheWorkerRunsOffTheCallersCpu) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs, this thread may use " << cpus.size();
  auto workers = CopyWorkers::Create(1);
  ASSERT_TRUE(workers.ok()) << workers.status();
  int unmoved = 0;
  for (int round = 0; round < 20; ++round) {
    const int before = sched_getcpu();
    int during = -1, worker_cpu = -1;
    cpu_set_t worker_mask;
    CPU_ZERO(&worker_mask);
    (*workers)->OnTwoThreads([&](size_t part) {
      if (part == 0) {
        during = sched_getcpu();
        return;
      }
      worker_cpu = sched_getcpu();
      sched_getaffinity(0, sizeof(worker_mask), &worker_mask);
    });
    const int after = sched_getcpu();
    EXPECT_EQ(CPU_COUNT(&worker_mask), static_cast<int>(cpus.size()) - 1);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &worker_mask)) {
        EXPECT_NE(std::find(cpus.begin(), cpus.end(), c), cpus.end()) << "CPU " << c;
      }
    }
    if (before == during && during == after) {
      ++unmoved;
      EXPECT_FALSE(CPU_ISSET(before, &worker_mask)) << "round " << round;
      EXPECT_NE(worker_cpu, before) << "round " << round;
    }
  }
  EXPECT_GT(unmoved, 0) << "the caller moved in every round";
}

// A caller that may use one CPU only gains nothing from a worker (the two
// would take turns on it): both halves run on the caller, in order.
TEST(CopyWorkersTest, ACallerOnOneCpuRunsBothHalves) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  auto workers = CopyWorkers::Create(1);
  ASSERT_TRUE(workers.ok()) << workers.status();
  PinnedTo pin(cpus[0]);
  ASSERT_TRUE(pin.ok());
  ExpectBothHalvesRunHereInOrder(**workers);
}

TEST(CopyWorkersTest, DefaultThreadsIsHalfTheUsableCpus) {
  const int cpus = static_cast<int>(AllowedCpus().size());
  EXPECT_EQ(CopyWorkers::DefaultThreads(), std::clamp(cpus / 2, 1, 32));
  PinnedTo pin(AllowedCpus()[0]);
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(CopyWorkers::DefaultThreads(), 1);
}

}  // namespace
}  // namespace kvtier
