#include "testing/faulty_copy_engine.h"

#include <utility>

#include "absl/time/clock.h"

namespace kvtier {

void FaultInjectingCopyEngine::SetPlan(const CopyFaultPlan& plan) {
  MutexLock lock(&mu_);
  plan_ = plan;
  rng_.seed(plan.seed);
}

CopyFaultCounts FaultInjectingCopyEngine::counts() const {
  MutexLock lock(&mu_);
  return counts_;
}

bool FaultInjectingCopyEngine::Roll(double p) {
  return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p;
}

absl::Status FaultInjectingCopyEngine::Submit(CopyBatch batch, CopyDone done) {
  bool refuse, fail, spike;
  absl::Duration delay;
  {
    MutexLock lock(&mu_);
    ++counts_.batches;
    refuse = Roll(plan_.refuse);
    fail = !refuse && Roll(plan_.failed_completion);
    spike = !refuse && Roll(plan_.latency_spike);
    delay = plan_.spike;
    counts_.refused += refuse;
    counts_.failed_completions += fail;
    counts_.latency_spikes += spike;
  }
  if (refuse) return absl::UnavailableError("injected: copy engine refused the batch");
  if (fail) {
    if (spike) absl::SleepFor(delay);
    done(absl::InternalError("injected: copy batch failed"));
    return absl::OkStatus();
  }
  if (!spike) return target()->Submit(std::move(batch), std::move(done));
  return target()->Submit(std::move(batch), [done = std::move(done), delay](absl::Status s) {
    absl::SleepFor(delay);
    done(std::move(s));
  });
}

}  // namespace kvtier
