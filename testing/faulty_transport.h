// FaultInjectingTransport: a Transport decorator that injects the failures a
// peer link produces (an operation that fails, a torn operation that moves
// only part of its bytes yet reports success, a latency spike, and a link
// that dies after N operations) from a seed, so a failing run replays
// exactly. Torn operations exercise the receiver's checksum verification:
// a transport that reports success is not trusted with the bytes.
//
// Thread-safety: thread-safe; the plan can change at any time (e.g. faults
// stop).
#ifndef KVTIER_TESTING_FAULTY_TRANSPORT_H_
#define KVTIER_TESTING_FAULTY_TRANSPORT_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "transfer/transport.h"
#include "transfer/transport_wrapper.h"

namespace kvtier {

struct TransportFaultPlan {
  double fail = 0;           // the op is not issued and ends UNAVAILABLE
  double torn = 0;           // only the first half of the op's bytes move; reported OK
  double latency_spike = 0;  // the batch is delayed by `spike` first
  absl::Duration spike = absl::Milliseconds(20);
  // Ops after this many (counted across batches) fail: the link died.
  uint64_t fail_after_ops = std::numeric_limits<uint64_t>::max();
  uint64_t seed = 1;
};

struct TransportFaultCounts {
  uint64_t ops = 0;
  uint64_t failed = 0;
  uint64_t torn = 0;
  uint64_t latency_spikes = 0;
};

class FaultInjectingTransport final : public TransportWrapper {
 public:
  FaultInjectingTransport(std::unique_ptr<Transport> inner, const TransportFaultPlan& plan)
      : TransportWrapper(std::move(inner)) {
    SetPlan(plan);
  }

  // Resets the op count and the random sequence.
  void SetPlan(const TransportFaultPlan& plan) ABSL_LOCKS_EXCLUDED(mu_);
  TransportFaultCounts counts() const ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<absl::Status> Execute(uint64_t connection, RmaKind kind, absl::Span<const RmaOp> ops,
                                    absl::Time deadline) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Roll(double p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  TransportFaultPlan plan_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  TransportFaultCounts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_FAULTY_TRANSPORT_H_
