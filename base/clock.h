// Clock: the time source of the storage engine (lease expiry), a seam so
// tests control time. SystemClock reads the real clock; FakeClock moves only
// when told.
//
// Thread-safety: both implementations are thread-safe.
#ifndef KVTIER_BASE_CLOCK_H_
#define KVTIER_BASE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace kvtier {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};

class SystemClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() override {
    MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_BASE_CLOCK_H_
