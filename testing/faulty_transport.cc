#include "testing/faulty_transport.h"

#include <utility>

#include "absl/time/clock.h"

namespace kvtier {

void FaultInjectingTransport::SetPlan(const TransportFaultPlan& plan) {
  MutexLock lock(&mu_);
  plan_ = plan;
  rng_.seed(plan.seed);
  counts_ = {};
}

TransportFaultCounts FaultInjectingTransport::counts() const {
  MutexLock lock(&mu_);
  return counts_;
}

bool FaultInjectingTransport::Roll(double p) {
  return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p;
}

std::vector<absl::Status> FaultInjectingTransport::Execute(uint64_t connection, RmaKind kind,
                                                           absl::Span<const RmaOp> ops,
                                                           absl::Time deadline) {
  std::vector<absl::Status> result(ops.size());
  std::vector<RmaOp> issued;
  std::vector<size_t> issued_index;
  absl::Duration delay;
  {
    MutexLock lock(&mu_);
    if (Roll(plan_.latency_spike)) {
      ++counts_.latency_spikes;
      delay = plan_.spike;
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      ++counts_.ops;
      if (counts_.ops > plan_.fail_after_ops || Roll(plan_.fail)) {
        ++counts_.failed;
        result[i] = absl::UnavailableError("injected transport fault: operation failed");
        continue;
      }
      RmaOp op = ops[i];
      if (Roll(plan_.torn)) {
        ++counts_.torn;
        op.bytes /= 2;
      }
      issued.push_back(op);
      issued_index.push_back(i);
    }
  }
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
  std::vector<absl::Status> inner = target()->Execute(connection, kind, issued, deadline);
  for (size_t j = 0; j < issued.size(); ++j) result[issued_index[j]] = inner[j];
  return result;
}

}  // namespace kvtier
