// CopyWorkers: long-lived threads that take one half of a region copy while
// the calling thread does the other (Save and Load of host regions split a
// group of blocks between two threads; region_groups.h).
//
// Why not a thread per copy: a thread started for each group began late.
// bench/shm_save_load at 256 KiB blocks (groups of 16 MiB, about 2 ms of
// copying a side) on the 2-core VM: in 15 of 20 groups the fresh thread
// started 1-2 ms after the caller's half had begun, about when it ended, so
// the two halves ran one after the other.
//
// Why the worker is kept off the caller's CPU: a woken worker was still
// late in about half the groups. The scheduler trace (perf sched events,
// same bench) showed the wake-up placing it on the caller's busy CPU while
// the other vCPU sat idle (an idle vCPU of a VM looks preempted to the
// guest's scheduler, which then prefers the waker's CPU), so it waited for
// the caller's half to end. Handing a job over limits the worker to the
// process's CPUs but the caller's (one sched_setaffinity call, skipped when
// the worker is already kept off that CPU or there is no other); with it
// every group's halves overlapped and Save at 256 KiB went from 0.40x to
// 0.60x of the memcpy limit.
//
// With no worker idle (as many two-thread copies running as there are
// workers), OnTwoThreads runs both halves on the calling thread: the cores
// are busy with copies anyway, and no copy waits for another's worker.
//
// Thread-safety: thread-safe. The destructor joins the workers; no
// OnTwoThreads call may still be running.
#ifndef KVTIER_DATAPATH_COPY_WORKERS_H_
#define KVTIER_DATAPATH_COPY_WORKERS_H_

#include <sched.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"

namespace kvtier {

class CopyWorkers final {
 public:
  // INVALID_ARGUMENT unless 1 <= threads <= 256; RESOURCE_EXHAUSTED when
  // the threads cannot be started.
  static absl::StatusOr<std::unique_ptr<CopyWorkers>> Create(int threads);
  ~CopyWorkers();
  CopyWorkers(const CopyWorkers&) = delete;
  CopyWorkers& operator=(const CopyWorkers&) = delete;

  // Runs part(0) on this thread and part(1) on an idle worker kept off this
  // thread's CPU, and returns when both are done; with no idle worker,
  // part(1) after part(0) here. `part` must not throw.
  void OnTwoThreads(const std::function<void(size_t part)>& part);

  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  // One handed-over half; lives on the caller's stack until `done`.
  struct Job {
    const std::function<void(size_t)>* part = nullptr;
    bool done = false;  // guarded by mu_
  };
  struct Worker {
    std::thread thread;
    Job* job = nullptr;  // guarded by mu_; set by OnTwoThreads, cleared when done
    int kept_off = -1;   // guarded by mu_; the CPU its affinity leaves out
  };

  CopyWorkers() = default;
  void Work(int index);
  // Limits `w` to the allowed CPUs but the caller's (when there are others).
  void KeepOffThisCpu(Worker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);  // workers with no job
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  cpu_set_t allowed_;            // this process's CPUs when created
  std::vector<Worker> workers_;  // sized before any thread starts
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_COPY_WORKERS_H_
