#include "datapath/copy_workers.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

// The CPUs the calling thread may run on (empty when unknown).
cpu_set_t CallersCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) CPU_ZERO(&set);
  return set;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CopyWorkers>> CopyWorkers::Create(int threads) {
  if (threads < 1 || threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy workers: ", threads, " threads asked for, 1..256 allowed"));
  }
  std::unique_ptr<CopyWorkers> w(new CopyWorkers());
  for (int i = 0; i < threads; ++i) w->workers_.push_back(std::make_unique<Worker>());
  {
    // Idle from the start: a job handed over before a worker first waits is
    // in its slot when it looks.
    MutexLock lock(&w->mu_);
    for (int i = threads - 1; i >= 0; --i) w->idle_.push_back(i);
  }
  for (int i = 0; i < threads; ++i) {
    Worker& worker = *w->workers_[i];
    try {
      worker.thread = std::thread([p = w.get(), &worker, i] { p->Work(worker, i); });
    } catch (const std::system_error& e) {
      // The destructor stops and joins the ones already started.
      return absl::ResourceExhaustedError(
          absl::StrCat("copy workers: thread ", i, " of ", threads, ": ", e.what()));
    }
  }
  return w;
}

int CopyWorkers::DefaultThreads() {
  const cpu_set_t cpus = CallersCpus();
  return std::clamp(CPU_COUNT(&cpus) / 2, 1, 32);
}

CopyWorkers::~CopyWorkers() {
  for (const std::unique_ptr<Worker>& w : workers_) {
    MutexLock lock(&w->mu);
    w->stopping = true;
  }
  for (const std::unique_ptr<Worker>& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void CopyWorkers::KeepOff(Worker& w, int cpu, const cpu_set_t& callers) {
  if (cpu == w.kept_off) return;
  cpu_set_t others = callers;
  CPU_CLR(cpu, &others);
  // A failure (the cpuset changed meanwhile) leaves the scheduler's choice.
  if (pthread_setaffinity_np(w.thread.native_handle(), sizeof(others), &others) == 0) {
    w.kept_off = cpu;
  }
}

void CopyWorkers::OnTwoThreads(const std::function<void(size_t part)>& part) {
  const auto run = [&part](size_t half) noexcept { part(half); };
  const cpu_set_t callers = CallersCpus();
  const int cpu = sched_getcpu();
  const bool elsewhere =
      CPU_COUNT(&callers) >= 2 && cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &callers);
  Worker* w = nullptr;
  if (elsewhere) {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      w = workers_[idle_.back()].get();
      idle_.pop_back();
    }
  }
  if (w == nullptr) {
    run(0);
    run(1);
    return;
  }
  KeepOff(*w, cpu, callers);  // before the wake-up, so it lands elsewhere
  Job job;
  job.part = &part;
  {
    MutexLock lock(&w->mu);
    w->job = &job;
  }
  run(0);
  MutexLock lock(&w->mu);
  w->mu.Await(Condition(&job.done));
}

void CopyWorkers::Work(Worker& self, int index) {
  auto ready = [&self]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(self.mu) {
    return self.stopping || self.job != nullptr;
  };
  for (;;) {
    Job* job = nullptr;
    {
      MutexLock lock(&self.mu);
      self.mu.Await(Condition(&ready));
      if (self.job == nullptr) return;  // stopping, and nothing handed over
      job = std::exchange(self.job, nullptr);
    }
    (*job->part)(1);
    {
      // Idle again before the caller learns it is done, so its next group
      // finds this worker.
      MutexLock lock(&mu_);
      idle_.push_back(index);
    }
    MutexLock lock(&self.mu);
    job->done = true;  // the caller may return (and `job` go) once self.mu is free
  }
}

}  // namespace kvtier
