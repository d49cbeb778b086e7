#include "testing/faulty_io_engine.h"

#include <cerrno>

namespace kvtier {

void FaultInjectingIoEngine::SetPlan(const FaultPlan& plan) {
  MutexLock lock(&mu_);
  plan_ = plan;
  rng_.seed(plan.seed);
}

FaultCounts FaultInjectingIoEngine::counts() const {
  MutexLock lock(&mu_);
  return counts_;
}

bool FaultInjectingIoEngine::Roll(double p) {
  if (p <= 0) return false;
  return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
}

std::vector<absl::Status> FaultInjectingIoEngine::Run(absl::Span<const IoOp> ops) {
  enum class Fault { kNone, kEio, kEnospc, kTorn };
  std::vector<Fault> faults(ops.size(), Fault::kNone);
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < ops.size(); ++i) {
      const bool write = ops[i].kind == IoOp::Kind::kWrite;
      if (Roll(plan_.eio)) {
        faults[i] = Fault::kEio;
        ++counts_.eio;
      } else if (write && Roll(plan_.enospc)) {
        faults[i] = Fault::kEnospc;
        ++counts_.enospc;
      } else if (write && ops[i].total() > kIoAlignment && Roll(plan_.torn_write)) {
        faults[i] = Fault::kTorn;
        ++counts_.torn_writes;
      }
    }
  }
  std::vector<IoOp> pass;
  std::vector<size_t> where;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (faults[i] == Fault::kEio || faults[i] == Fault::kEnospc) continue;
    IoOp op = ops[i];
    if (faults[i] == Fault::kTorn) {  // only the first 4 KiB reach the disk
      op.length = kIoAlignment;
      op.data2 = nullptr;
      op.length2 = 0;
    }
    pass.push_back(op);
    where.push_back(i);
  }
  std::vector<absl::Status> inner = target()->Run(pass);
  std::vector<absl::Status> out(ops.size());
  for (size_t j = 0; j < pass.size(); ++j) out[where[j]] = inner[j];
  for (size_t i = 0; i < ops.size(); ++i) {
    if (faults[i] == Fault::kEio) out[i] = IoErrorStatus(EIO, "injected");
    if (faults[i] == Fault::kEnospc) out[i] = IoErrorStatus(ENOSPC, "injected");
  }
  return out;
}

absl::Status FaultInjectingIoEngine::Sync(int file) {
  {
    MutexLock lock(&mu_);
    if (Roll(plan_.sync_eio)) {
      ++counts_.sync_failures;
      return IoErrorStatus(EIO, "injected fdatasync");
    }
  }
  return target()->Sync(file);
}

}  // namespace kvtier
