// TransferMeter: the measured speed of one tier, as the planner needs it: a
// fixed latency per transfer and a bandwidth. It is seeded (by a probe at
// start, or by configuration) and then follows real transfers: each
// Record(bytes, elapsed) moves the bandwidth estimate towards
// bytes / (elapsed - latency) by an exponentially weighted moving average.
// The latency stays at its seed (same-size block reads cannot separate the
// two; a probe measures it with a small transfer).
//
// Thread-safety: thread-safe.
#ifndef KVTIER_STORAGE_TRANSFER_METER_H_
#define KVTIER_STORAGE_TRANSFER_METER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace kvtier {

struct TransferEstimate {
  double bytes_per_s = 0;
  double latency_s = 0;
  uint64_t samples = 0;  // transfers recorded since the seed
  std::string source;    // "probe", "configured", "none"...
};

class TransferMeter {
 public:
  // alpha: weight of each new sample in (0, 1].
  explicit TransferMeter(double alpha = 0.2) : alpha_(alpha) {}

  // Replaces the estimate (bytes_per_s > 0, latency_s >= 0) and clears the
  // sample count.
  void Seed(double bytes_per_s, double latency_s, std::string source) ABSL_LOCKS_EXCLUDED(mu_);
  // Folds one transfer into the bandwidth. Ignored for 0 bytes; a transfer
  // faster than the latency counts as one of latency_s / 2 (no infinite
  // samples). Before any seed, the first transfer sets the bandwidth.
  void Record(uint64_t bytes, absl::Duration elapsed) ABSL_LOCKS_EXCLUDED(mu_);
  TransferEstimate Estimate() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const double alpha_;
  mutable Mutex mu_;
  TransferEstimate estimate_ ABSL_GUARDED_BY(mu_){0, 0, 0, "none"};
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_TRANSFER_METER_H_
