#include "datapath/copy_workers.h"

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
  {
    // Idle from the start: a job handed over before a worker first waits is
    // in the queue when it looks.
    MutexLock lock(&w->mu_);
    w->idle_ = threads;
  }
  for (int i = 0; i < threads; ++i) {
    try {
      w->threads_.emplace_back([p = w.get()] { p->Work(); });
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
  for (std::thread& t : threads_) t.join();
}

void CopyWorkers::OnTwoThreads(const std::function<void(size_t part)>& part) {
  Job job;
  job.part = &part;
  bool handed = false;
  {
    MutexLock lock(&mu_);
    if (idle_ > 0) {
      --idle_;
      jobs_.push_back(&job);
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

void CopyWorkers::Work() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); };
  for (;;) {
    Job* job = nullptr;
    {
      MutexLock lock(&mu_);
      mu_.Await(Condition(&ready));
      if (jobs_.empty()) return;  // stopping, and nothing handed over
      job = jobs_.front();
      jobs_.pop_front();
    }
    (*job->part)(1);
    MutexLock lock(&mu_);
    job->done = true;  // the caller may return (and `job` go) once mu_ is free
    ++idle_;
  }
}

}  // namespace kvtier
