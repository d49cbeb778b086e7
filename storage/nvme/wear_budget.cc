#include "storage/nvme/wear_budget.h"

#include <algorithm>
#include <cmath>

namespace kvtier {
namespace {
constexpr double kSecondsPerDay = 86400;
constexpr double kRateTimeConstantS = 60;
}  // namespace

WearBudget::WearBudget(const WearOptions& options, Clock* clock)
    : options_(options),
      clock_(clock),
      rate_(static_cast<double>(options.capacity_bytes) * options.dwpd * options.safety /
            kSecondsPerDay),
      burst_(rate_ * options.burst_seconds) {
  MutexLock lock(&mu_);
  tokens_ = burst_;
  refilled_ = decayed_ = clock_->Now();
}

void WearBudget::RefillLocked(absl::Time now) {
  const double dt = absl::ToDoubleSeconds(now - refilled_);
  if (dt > 0) tokens_ = std::min(burst_, tokens_ + dt * rate_);
  refilled_ = now;
}

void WearBudget::DecayLocked(absl::Time now) {
  const double dt = absl::ToDoubleSeconds(now - decayed_);
  if (dt > 0) write_rate_ *= std::exp(-dt / kRateTimeConstantS);
  decayed_ = now;
}

bool WearBudget::TryConsume(uint64_t bytes) {
  MutexLock lock(&mu_);
  RefillLocked(clock_->Now());
  if (tokens_ < static_cast<double>(bytes)) {
    over_ = true;
    return false;
  }
  tokens_ -= static_cast<double>(bytes);
  over_ = false;
  return true;
}

void WearBudget::Refund(uint64_t bytes) {
  MutexLock lock(&mu_);
  tokens_ = std::min(burst_, tokens_ + static_cast<double>(bytes));
}

void WearBudget::RecordWrite(uint64_t bytes) {
  MutexLock lock(&mu_);
  DecayLocked(clock_->Now());
  written_ += bytes;
  write_rate_ += static_cast<double>(bytes) / kRateTimeConstantS;
}

WearReport WearBudget::Report() {
  MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  RefillLocked(now);
  DecayLocked(now);
  WearReport r;
  r.budget_bytes_per_day = rate_ * kSecondsPerDay;
  r.tbw_bytes =
      static_cast<double>(options_.capacity_bytes) * options_.dwpd * 365 * options_.warranty_years;
  r.bytes_written = written_;
  r.write_rate_bytes_per_s = write_rate_;
  if (write_rate_ > 1e-9) {
    r.days_to_wear_out =
        std::max(0.0, r.tbw_bytes - static_cast<double>(written_)) / (write_rate_ * kSecondsPerDay);
  }
  r.tokens_bytes = tokens_;
  r.over_budget = over_;
  return r;
}

}  // namespace kvtier
