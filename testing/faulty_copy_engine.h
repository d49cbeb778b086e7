// FaultInjectingCopyEngine: a CopyEngine decorator that injects the failures
// a GPU copy path produces (a batch refused at submission, a batch that
// completes with an error, a latency spike) from a seed, so a failing run
// replays exactly. Torn copies that report success are not injected: the
// data path trusts a copy the engine reports done (CUDA reports failures),
// and verifies host-side bytes itself.
//
// Thread-safety: thread-safe; the plan can change at any time (e.g. faults
// stop).
#ifndef KVTIER_TESTING_FAULTY_COPY_ENGINE_H_
#define KVTIER_TESTING_FAULTY_COPY_ENGINE_H_

#include <cstdint>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "datapath/copy_engine.h"
#include "datapath/copy_engine_wrapper.h"

namespace kvtier {

struct CopyFaultPlan {
  double refuse = 0;             // Submit fails (UNAVAILABLE), nothing copied, no completion
  double failed_completion = 0;  // the batch is not copied and completes with INTERNAL
  double latency_spike = 0;      // the completion is delayed by `spike`
  absl::Duration spike = absl::Milliseconds(20);
  uint64_t seed = 1;
};

struct CopyFaultCounts {
  uint64_t batches = 0;
  uint64_t refused = 0;
  uint64_t failed_completions = 0;
  uint64_t latency_spikes = 0;
};

class FaultInjectingCopyEngine final : public CopyEngineWrapper {
 public:
  FaultInjectingCopyEngine(CopyEngine* inner, const CopyFaultPlan& plan)
      : CopyEngineWrapper(inner) {
    SetPlan(plan);
  }

  void SetPlan(const CopyFaultPlan& plan) ABSL_LOCKS_EXCLUDED(mu_);
  CopyFaultCounts counts() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Submit(CopyBatch batch, CopyDone done) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Roll(double p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  CopyFaultPlan plan_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  CopyFaultCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_FAULTY_COPY_ENGINE_H_
