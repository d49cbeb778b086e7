#include "server/log_rate_limiter.h"

namespace kvtier {

LogRateLimiter::LogRateLimiter(absl::Duration interval, Clock* clock, size_t max_reasons)
    : interval_(interval), clock_(clock), max_reasons_(max_reasons) {}

LogRateLimiter::Verdict LogRateLimiter::Record(absl::string_view reason) {
  const absl::Time now = clock_->Now();
  MutexLock lock(&mu_);
  auto it = reasons_.find(reason);
  if (it == reasons_.end()) {
    // One slot stays free for kOtherReason.
    if (reasons_.size() + 1 >= max_reasons_ && reason != kOtherReason) reason = kOtherReason;
    it = reasons_.try_emplace(reason).first;
  }
  Entry& e = it->second;
  ++e.count;
  if (now - e.last_logged < interval_) {
    ++e.suppressed;
    return Verdict{};
  }
  Verdict v{true, e.suppressed};
  e.last_logged = now;
  e.suppressed = 0;
  return v;
}

uint64_t LogRateLimiter::Count(absl::string_view reason) const {
  MutexLock lock(&mu_);
  auto it = reasons_.find(reason);
  return it == reasons_.end() ? 0 : it->second.count;
}

}  // namespace kvtier
