// kvtier's locks: Mutex, MutexLock, Condition and Notification, the part of
// abseil's synchronization interface kvtier uses, built on std::mutex and
// std::condition_variable and carrying abseil's thread-safety annotations
// (clang's -Wthread-safety checks them; CI builds with it).
//
// Why not absl::Mutex: Debian's abseil is not built with ThreadSanitizer, so
// TSan cannot see hand-offs through absl::Mutex and reports every access it
// guards as a race. TSan intercepts the pthread calls under std::mutex, so
// with these types the TSan job (`make test-tsan`) sees kvtier's locking.
//
// Semantics follow absl::Mutex where kvtier relies on them:
//  - Await(cond) blocks, the lock released, until cond holds; cond is
//    re-evaluated (under the lock) after every Unlock of this Mutex by any
//    thread, and when another thread blocks in Await (which releases it
//    too), so whoever changes the guarded state need not signal.
//  - Not reentrant; AssertHeld() informs the analysis only (no run-time check).
// Unlock costs one branch when nobody awaits; while a thread awaits, every
// Unlock wakes it (a system call, and the waiter then takes the lock to
// re-evaluate its condition). So a thread that sleeps until told (a
// dispatcher, a background mover) awaits a Mutex of its own, not one its
// callers take on a hot path: the block event bus's dispatcher awaiting the
// bus's lock cost a wake-up and a context switch per stored block.
#ifndef KVTIER_BASE_MUTEX_H_
#define KVTIER_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kvtier {

// A predicate over state guarded by the Mutex it is awaited on: a pointer to
// a bool, or a pointer to a callable returning bool. It does not own what it
// points at, which must outlive the Await.
class Condition {
 public:
  explicit Condition(const bool* flag)
      : eval_([flag]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return *flag; }) {}
  // The analysis cannot see that Await evaluates it with the lock held.
  template <typename F, typename = std::enable_if_t<std::is_invocable_r_v<bool, const F&> &&
                                                    !std::is_same_v<F, bool>>>
  explicit Condition(const F* f) : eval_([f]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return (*f)(); }) {}

  bool Eval() const { return eval_(); }

 private:
  std::function<bool()> eval_;
};

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes awaiting threads before releasing: once unlocked, nothing of this
  // Mutex is touched, so a waiter may destroy it (a Notification on the
  // stack of the thread it releases).
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (waiters_ > 0) cv_.notify_all();
    mu_.unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // REQUIRES: held. Returns with it held and cond true.
  void Await(const Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitUntil(cond, std::chrono::steady_clock::time_point::max());
  }
  // REQUIRES: held. Returns with it held; true when cond holds, false when
  // the timeout (deadline) passed first.
  bool AwaitWithTimeout(const Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitUntil(cond, SteadyDeadline(timeout));
  }
  bool AwaitWithDeadline(const Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitUntil(cond, SteadyDeadline(deadline - absl::Now()));
  }

 private:
  static std::chrono::steady_clock::time_point SteadyDeadline(absl::Duration timeout) {
    const auto now = std::chrono::steady_clock::now();
    if (timeout == absl::InfiniteDuration() ||
        timeout > absl::Hours(24 * 365)) {  // far enough to mean "never"
      return std::chrono::steady_clock::time_point::max();
    }
    if (timeout <= absl::ZeroDuration()) return now;
    return now + absl::ToChronoNanoseconds(timeout);
  }

  bool AwaitUntil(const Condition& cond, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++waiters_;
    bool ok = cond.Eval();
    // Blocking releases the lock like an Unlock: what this thread changed
    // before calling Await may be what another waiter awaits.
    if (!ok && waiters_ > 1) cv_.notify_all();
    while (!ok) {
      if (deadline == std::chrono::steady_clock::time_point::max()) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        ok = cond.Eval();
        break;
      }
      ok = cond.Eval();
    }
    --waiters_;
    lock.release();  // still held, now by the caller again
    return ok;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int waiters_ = 0;  // threads inside Await; read and written with mu_ held
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A one-shot event: Notify() once; waiters return once it has happened.
class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    mu_.Await(Condition(&notified_));
  }
  // True when notified, false when the timeout passed first.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(Condition(&notified_), timeout);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kvtier

#endif  // KVTIER_BASE_MUTEX_H_
