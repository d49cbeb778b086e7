// CopyWorkers: long-lived threads that take one half of a region copy while
// the calling thread does the other (Save and Load of host regions split a
// group of blocks between two threads; region_groups.h).
//
// Why not a thread per copy: a thread started for each group began late.
// bench/shm_save_load at 256 KiB blocks (groups of 16 MiB, about 2 ms of
// copying a side) on the 2-core VM: in 15 of 20 groups the fresh thread
// started 1-2 ms after the caller's half had begun, about when it ended, so
// the two halves ran one after the other. A worker woken from a wait starts
// at once.
//
// With no worker idle (as many two-thread copies running as there are
// workers), OnTwoThreads runs both halves on the calling thread: the cores
// are busy with copies anyway, and no copy waits for another's worker.
//
// Thread-safety: thread-safe. The destructor joins the workers; no
// OnTwoThreads call may still be running.
#ifndef KVTIER_DATAPATH_COPY_WORKERS_H_
#define KVTIER_DATAPATH_COPY_WORKERS_H_

#include <cstddef>
#include <deque>
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

  // Runs part(0) on this thread and part(1) on an idle worker, and returns
  // when both are done; with no idle worker, part(1) after part(0) here.
  // `part` must not throw.
  void OnTwoThreads(const std::function<void(size_t part)>& part);

  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  // One handed-over half; lives on the caller's stack until `done`.
  struct Job {
    const std::function<void(size_t)>* part = nullptr;
    bool done = false;  // guarded by mu_
  };

  CopyWorkers() = default;
  void Work();

  Mutex mu_;
  std::deque<Job*> jobs_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // workers neither running nor promised a job
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_COPY_WORKERS_H_
