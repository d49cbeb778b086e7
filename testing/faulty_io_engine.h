// FaultInjectingIoEngine: an IoEngine decorator that injects the failures
// drives produce (EIO, ENOSPC, torn writes that report success) from a seed,
// so a failing run replays exactly. Used by tests of everything above the
// IoEngine seam; the plan can change at any time (e.g. faults stop).
//
// Thread-safety: thread-safe.
#ifndef KVTIER_TESTING_FAULTY_IO_ENGINE_H_
#define KVTIER_TESTING_FAULTY_IO_ENGINE_H_

#include <cstdint>
#include <random>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "storage/nvme/io_engine.h"
#include "storage/nvme/io_engine_wrapper.h"

namespace kvtier {

struct FaultPlan {
  double eio = 0;         // probability an op fails with EIO (not performed)
  double enospc = 0;      // probability a write fails with ENOSPC (not performed)
  double torn_write = 0;  // probability a write lands only its first 4 KiB yet reports OK
  double sync_eio = 0;    // probability Sync fails with EIO
  uint64_t seed = 1;
};

struct FaultCounts {
  uint64_t eio = 0;
  uint64_t enospc = 0;
  uint64_t torn_writes = 0;
  uint64_t sync_failures = 0;
};

class FaultInjectingIoEngine final : public IoEngineWrapper {
 public:
  FaultInjectingIoEngine(IoEngine* inner, const FaultPlan& plan) : IoEngineWrapper(inner) {
    SetPlan(plan);
  }

  void SetPlan(const FaultPlan& plan) ABSL_LOCKS_EXCLUDED(mu_);
  FaultCounts counts() const ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<absl::Status> Run(absl::Span<const IoOp> ops) override;
  absl::Status Sync(int file) override;

 private:
  bool Roll(double p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  FaultPlan plan_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  FaultCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_FAULTY_IO_ENGINE_H_
