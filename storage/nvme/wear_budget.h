// WearBudget: write-endurance accounting for one SSD. The daily budget is
// capacity x DWPD x safety factor; a token bucket refilled at that rate (and
// holding at most `burst_seconds` of it) decides whether a write may be
// admitted. It also tracks bytes written, the recent write rate (decaying
// average, 60 s time constant) and the days left until the drive's rated
// endurance (TBW = capacity x DWPD x 365 x warranty years) at that rate.
// Over budget, the NVMe tier stops admitting; requests still succeed.
//
// Thread-safety: thread-safe.
#ifndef KVTIER_STORAGE_NVME_WEAR_BUDGET_H_
#define KVTIER_STORAGE_NVME_WEAR_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/mutex.h"

namespace kvtier {

struct WearOptions {
  uint64_t capacity_bytes = 0;  // the drive's capacity (not the tier's share)
  double dwpd = 1.0;            // rated drive writes per day
  double warranty_years = 5;
  double safety = 0.8;          // fraction of the rated endurance the daemon may use
  double burst_seconds = 3600;  // bucket size, in seconds of budget
};

struct WearReport {
  double budget_bytes_per_day = 0;
  double tbw_bytes = 0;
  uint64_t bytes_written = 0;
  double write_rate_bytes_per_s = 0;
  double days_to_wear_out = -1;  // -1: no recent writes
  double tokens_bytes = 0;       // what may be written right now
  bool over_budget = false;      // the last admission was refused
};

class WearBudget {
 public:
  WearBudget(const WearOptions& options, Clock* clock);

  // Takes `bytes` of budget; false (and nothing taken) when over budget.
  bool TryConsume(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back budget taken for a write that did not happen.
  void Refund(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Accounts bytes actually written.
  void RecordWrite(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  WearReport Report() ABSL_LOCKS_EXCLUDED(mu_);
  const WearOptions& options() const { return options_; }

 private:
  void RefillLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecayLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WearOptions options_;
  Clock* const clock_;
  const double rate_;   // budget bytes per second
  const double burst_;  // bucket size in bytes
  Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time refilled_ ABSL_GUARDED_BY(mu_);
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  double write_rate_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time decayed_ ABSL_GUARDED_BY(mu_);
  bool over_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_WEAR_BUDGET_H_
