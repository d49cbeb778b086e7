#include "datapath/copy_workers.h"

#include <pthread.h>
#include <sched.h>

#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<CopyWorkers>> CopyWorkers::Create(int threads) {
  if (threads < 1 || threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy workers: ", threads, " threads asked for, 1..256 allowed"));
  }
  std::unique_ptr<CopyWorkers> w(new CopyWorkers());
  CPU_ZERO(&w->allowed_);
  if (sched_getaffinity(0, sizeof(w->allowed_), &w->allowed_) != 0) CPU_ZERO(&w->allowed_);
  w->workers_ = std::vector<Worker>(threads);
  {
    // Idle from the start: a job handed over before a worker first waits is
    // in its slot when it looks.
    MutexLock lock(&w->mu_);
    for (int i = threads - 1; i >= 0; --i) w->idle_.push_back(i);
  }
  for (int i = 0; i < threads; ++i) {
    try {
      w->workers_[i].thread = std::thread([p = w.get(), i] { p->Work(i); });
    } catch (const std::system_error& e) {
      // The destructor stops and joins the ones already started.
      return absl::ResourceExhaustedError(
          absl::StrCat("copy workers: thread ", i, " of ", threads, ": ", e.what()));
    }
  }
  return w;
}

CopyWorkers::~CopyWorkers() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (Worker& w : workers_) {
    if (w.thread.joinable()) w.thread.join();
  }
}

void CopyWorkers::KeepOffThisCpu(Worker& w) {
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu == w.kept_off || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_) ||
      CPU_COUNT(&allowed_) < 2) {
    return;
  }
  cpu_set_t others = allowed_;
  CPU_CLR(cpu, &others);
  // A failure only leaves the scheduler's choice in place.
  if (pthread_setaffinity_np(w.thread.native_handle(), sizeof(others), &others) == 0) {
    w.kept_off = cpu;
  }
}

void CopyWorkers::OnTwoThreads(const std::function<void(size_t part)>& part) {
  Job job;
  job.part = &part;
  bool handed = false;
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      Worker& w = workers_[idle_.back()];
      idle_.pop_back();
      KeepOffThisCpu(w);
      w.job = &job;
      handed = true;
    }
  }
  part(0);
  if (!handed) {
    part(1);
    return;
  }
  MutexLock lock(&mu_);
  mu_.Await(Condition(&job.done));
}

void CopyWorkers::Work(int index) {
  Worker& self = workers_[index];
  auto ready = [&]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || self.job != nullptr; };
  for (;;) {
    Job* job = nullptr;
    {
      MutexLock lock(&mu_);
      mu_.Await(Condition(&ready));
      if (self.job == nullptr) return;  // stopping, and nothing handed over
      job = self.job;
    }
    (*job->part)(1);
    MutexLock lock(&mu_);
    self.job = nullptr;
    job->done = true;  // the caller may return (and `job` go) once mu_ is free
    idle_.push_back(index);
  }
}

}  // namespace kvtier
