#include "datapath/copy_workers.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace kvtier {
namespace {

TEST(CopyWorkersTest, RefusesAThreadCountOutOfRange) {
  EXPECT_EQ(CopyWorkers::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CopyWorkers::Create(257).status().code(), absl::StatusCode::kInvalidArgument);
}

// The second half runs on a worker, at the same time as the first: each
// half waits for the other to have started, which one thread doing both in
// turn could never satisfy.
TEST(CopyWorkersTest, TheHalvesRunAtOnceOnTwoThreads) {
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
      mu.Await(Condition(&started[1 - part]));
    });
    EXPECT_TRUE(started[0] && started[1]);
    EXPECT_EQ(ran_on[0], std::this_thread::get_id());
    EXPECT_NE(ran_on[1], std::this_thread::get_id());
  }
}

// With every worker busy, a call does both halves itself (in order) instead
// of waiting for a worker; the busy worker's call is unaffected.
TEST(CopyWorkersTest, WithNoWorkerIdleBothHalvesRunOnTheCaller) {
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
  std::vector<size_t> order;
  std::vector<std::thread::id> ran_on;
  (*workers)->OnTwoThreads([&](size_t part) {
    order.push_back(part);
    ran_on.push_back(std::this_thread::get_id());
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(ran_on, (std::vector<std::thread::id>(2, std::this_thread::get_id())));
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

// The worker is kept off the caller's CPU (the scheduler would otherwise
// queue it there behind the caller): with the caller pinned to one CPU, the
// worker runs elsewhere and its mask is every other allowed CPU.
TEST(CopyWorkersTest, TheWorkerRunsOffTheCallersCpu) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs, this process may use " << cpus.size();
  auto workers = CopyWorkers::Create(1);
  ASSERT_TRUE(workers.ok()) << workers.status();
  for (int caller_cpu : {cpus[0], cpus[1], cpus[0]}) {
    PinnedTo pin(caller_cpu);
    ASSERT_TRUE(pin.ok());
    int worker_cpu = -1;
    cpu_set_t worker_mask;
    CPU_ZERO(&worker_mask);
    (*workers)->OnTwoThreads([&](size_t part) {
      if (part == 0) return;
      worker_cpu = sched_getcpu();
      sched_getaffinity(0, sizeof(worker_mask), &worker_mask);
    });
    EXPECT_NE(worker_cpu, caller_cpu);
    EXPECT_FALSE(CPU_ISSET(caller_cpu, &worker_mask));
    EXPECT_EQ(CPU_COUNT(&worker_mask), static_cast<int>(cpus.size()) - 1);
  }
}

// With one CPU allowed there is nowhere else to go: the worker's mask is
// left alone and the halves still run at once (time-shared).
TEST(CopyWorkersTest, OnOneCpuTheWorkerStillTakesItsHalf) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  PinnedTo pin(cpus[0]);
  ASSERT_TRUE(pin.ok());
  auto workers = CopyWorkers::Create(1);  // created on one CPU: that is all it may use
  ASSERT_TRUE(workers.ok()) << workers.status();
  Mutex mu;
  bool started[2] = {false, false};
  cpu_set_t worker_mask;
  CPU_ZERO(&worker_mask);
  (*workers)->OnTwoThreads([&](size_t part) {
    if (part == 1) sched_getaffinity(0, sizeof(worker_mask), &worker_mask);
    MutexLock lock(&mu);
    started[part] = true;
    mu.Await(Condition(&started[1 - part]));
  });
  EXPECT_TRUE(started[0] && started[1]);
  EXPECT_EQ(CPU_COUNT(&worker_mask), 1);
  EXPECT_TRUE(CPU_ISSET(cpus[0], &worker_mask));
}

}  // namespace
}  // namespace kvtier
