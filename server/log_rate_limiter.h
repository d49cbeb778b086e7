// LogRateLimiter: decides which of a stream of repeated log lines are
// written, so that a flood of identical events (a client retrying a refused
// call in a loop) cannot fill the log or slow the process with logging. Per
// reason, at most one line per `interval`; the line that is written next
// says how many were held back in between. Every event is counted, written
// or not.
//
// Reasons are free text chosen by the caller; at most `max_reasons` distinct
// ones are tracked, and events of any further reason share the reason
// kOtherReason (the memory use is bounded whatever the caller passes).
//
// Thread-safety: thread-safe.
#ifndef KVTIER_SERVER_LOG_RATE_LIMITER_H_
#define KVTIER_SERVER_LOG_RATE_LIMITER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/mutex.h"

namespace kvtier {

class LogRateLimiter final {
 public:
  static constexpr absl::string_view kOtherReason = "(other reasons)";

  struct Verdict {
    bool log = false;         // write this line
    uint64_t suppressed = 0;  // when `log`: lines of this reason held back since the last one
  };

  // `clock` must outlive this object.
  LogRateLimiter(absl::Duration interval, Clock* clock, size_t max_reasons = 64);
  LogRateLimiter(const LogRateLimiter&) = delete;
  LogRateLimiter& operator=(const LogRateLimiter&) = delete;

  // Records one event of `reason` and says whether to log it.
  Verdict Record(absl::string_view reason);

  // Events of `reason` recorded so far, logged or not.
  uint64_t Count(absl::string_view reason) const;

 private:
  struct Entry {
    absl::Time last_logged = absl::InfinitePast();
    uint64_t suppressed = 0;
    uint64_t count = 0;
  };

  const absl::Duration interval_;
  Clock* const clock_;
  const size_t max_reasons_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> reasons_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_LOG_RATE_LIMITER_H_
