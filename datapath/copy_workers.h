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
// the other vCPU sat idle (likely because the guest's scheduler counts a
// halted idle vCPU as preempted and so prefers the waker's CPU; not
// verified in the kernel), so it waited for the caller's half to end.
// Handing a job over limits the worker to the caller's CPUs but its
// current one (one pthread_setaffinity_np call, skipped when the worker is
// already kept off that CPU); with it every group's halves overlapped and
// Save at 256 KiB went from 0.40x to 0.60x of the memcpy limit. The
// caller's mask is read at each hand-over, so a cpuset that changes under a
// running daemon is followed.
//
// Both halves run on the calling thread, one after the other, when no
// worker is idle (as many two-thread copies running as there are workers:
// the cores are busy with copies anyway, and no copy waits for another's
// worker) or when the caller may run on one CPU only (a hand-over would
// only add two context switches). So the halves must not wait for each
// other.
//
// Each worker waits on a mutex of its own: a hand-over wakes that worker
// only.
//
// Thread-safety: thread-safe. The destructor joins the workers; no
// OnTwoThreads call may still be running.
#ifndef KVTIER_DATAPATH_COPY_WORKERS_H_
#define KVTIER_DATAPATH_COPY_WORKERS_H_

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
  // A two-thread copy is its caller and one worker, so half as many workers
  // as the CPUs this process may use (its affinity mask, which a container's
  // cpuset limits) keep every CPU copying; at least 1, at most 32.
  static int DefaultThreads();
  ~CopyWorkers();
  CopyWorkers(const CopyWorkers&) = delete;
  CopyWorkers& operator=(const CopyWorkers&) = delete;

  // Runs part(0) on this thread and part(1) on an idle worker kept off this
  // thread's CPU, and returns when both are done; runs both here, in order,
  // when no worker is idle or this thread may use one CPU only. `part` must
  // not throw (a throw terminates: the worker may still be using it).
  void OnTwoThreads(const std::function<void(size_t part)>& part) ABSL_LOCKS_EXCLUDED(mu_);

  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  // One handed-over half; lives on the caller's stack until `done`.
  struct Job {
    const std::function<void(size_t)>* part = nullptr;
    bool done = false;  // guarded by the worker's mu
  };
  struct Worker {
    Mutex mu;
    Job* job ABSL_GUARDED_BY(mu) = nullptr;  // set by OnTwoThreads, taken by the worker
    bool stopping ABSL_GUARDED_BY(mu) = false;
    // The CPU its affinity leaves out; touched only by the caller that took
    // it off the idle list.
    int kept_off = -1;
    std::thread thread;
  };

  CopyWorkers() = default;
  void Work(Worker& self, int index) ABSL_LOCKS_EXCLUDED(mu_);
  // Limits `w` to the caller's CPUs but `cpu`. REQUIRES: the caller took `w`
  // off the idle list.
  static void KeepOff(Worker& w, int cpu, const cpu_set_t& callers);

  Mutex mu_;
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);    // workers with no job
  std::vector<std::unique_ptr<Worker>> workers_;  // sized before any thread starts
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_COPY_WORKERS_H_
