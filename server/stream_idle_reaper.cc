#include "server/stream_idle_reaper.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "spdlog/spdlog.h"

namespace kvtier {

StreamIdleReaper::StreamIdleReaper(absl::Duration idle, Clock* clock, bool run_thread)
    : idle_(idle), clock_(clock) {
  if (!run_thread || idle_ <= absl::ZeroDuration()) return;
  // Check four times per limit (at most once a second): a stream is
  // cancelled between idle and 1.25 x idle after it last moved.
  const absl::Duration period = std::min(idle_ / 4, absl::Seconds(1));
  thread_ = std::thread([this, period] {
    while (!stop_.WaitForNotificationWithTimeout(period)) ReapOnce();
  });
}

StreamIdleReaper::~StreamIdleReaper() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<StreamIdleReaper::Watch> StreamIdleReaper::Track(std::function<void()> cancel) {
  if (idle_ <= absl::ZeroDuration()) return Unwatched();
  std::unique_ptr<Watch> w(new Watch(this, std::move(cancel), clock_->Now()));
  MutexLock lock(&mu_);
  watches_.insert(w.get());
  return w;
}

std::unique_ptr<StreamIdleReaper::Watch> StreamIdleReaper::Unwatched() {
  return std::unique_ptr<Watch>(new Watch(nullptr, nullptr, absl::InfinitePast()));
}

size_t StreamIdleReaper::ReapOnce() {
  const int64_t cutoff = absl::ToUnixNanos(clock_->Now() - idle_);
  size_t n = 0;
  MutexLock lock(&mu_);
  for (Watch* w : watches_) {
    if (w->cancelled_ || w->last_ns_.load(std::memory_order_relaxed) >= cutoff) continue;
    // Under the lock: the Watch (and the call it cancels) cannot go away
    // meanwhile. TryCancel only flags the call, so this is quick.
    w->cancelled_ = true;
    w->cancel_();
    ++n;
  }
  if (n > 0) {
    cancelled_.fetch_add(n, std::memory_order_relaxed);
    spdlog::warn("cancelled {} stream(s) idle for over {} (limits.stream_idle_timeout_ms)", n,
                 absl::FormatDuration(idle_));
  }
  return n;
}

void StreamIdleReaper::Forget(Watch* watch) {
  MutexLock lock(&mu_);
  watches_.erase(watch);
}

StreamIdleReaper::Watch::Watch(StreamIdleReaper* reaper, std::function<void()> cancel,
                               absl::Time now)
    : reaper_(reaper), cancel_(std::move(cancel)), last_ns_(absl::ToUnixNanos(now)) {}

StreamIdleReaper::Watch::~Watch() {
  if (reaper_ != nullptr) reaper_->Forget(this);
}

void StreamIdleReaper::Watch::Touch() {
  if (reaper_ == nullptr) return;
  last_ns_.store(absl::ToUnixNanos(reaper_->clock_->Now()), std::memory_order_relaxed);
}

}  // namespace kvtier
