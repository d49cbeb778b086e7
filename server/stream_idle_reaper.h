// StreamIdleReaper: cancels streaming calls that stop moving. A client that
// opens a Put and sends one byte, or starts a Get or Load and never reads,
// would otherwise hold its reserved slots or pinned blocks (and a server
// thread) for as long as it likes. Each streaming handler tracks its call
// and touches the watch whenever a message moves; a call idle for longer
// than the limit is cancelled (its handler then sees a cancelled context,
// fails the call and frees what it held).
//
// Thread-safety: thread-safe. Watch::Touch is lock-free and may be called
// from the handler's thread while the reaper runs. A Watch must be destroyed
// before whatever its cancel function refers to (the handler's context), and
// the reaper never calls the function after the Watch is gone.
#ifndef KVTIER_SERVER_STREAM_IDLE_REAPER_H_
#define KVTIER_SERVER_STREAM_IDLE_REAPER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/mutex.h"

namespace kvtier {

class StreamIdleReaper {
 public:
  class Watch;

  // idle: how long a stream may move nothing (ZeroDuration: forever; then
  // Track returns inert watches and no thread runs). `clock` must outlive
  // the reaper. With run_thread false, tests call ReapOnce themselves.
  StreamIdleReaper(absl::Duration idle, Clock* clock, bool run_thread = true);
  ~StreamIdleReaper();
  StreamIdleReaper(const StreamIdleReaper&) = delete;
  StreamIdleReaper& operator=(const StreamIdleReaper&) = delete;

  // Starts watching a call; `cancel` ends it (e.g. ServerContext::TryCancel)
  // and is called at most once.
  std::unique_ptr<Watch> Track(std::function<void()> cancel) ABSL_LOCKS_EXCLUDED(mu_);
  // A watch that no reaper watches (Touch does nothing).
  static std::unique_ptr<Watch> Unwatched();
  // Cancels every watched call idle for longer than the limit; returns how
  // many it cancelled now.
  size_t ReapOnce() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  absl::Duration idle_limit() const { return idle_; }

 private:
  friend class Watch;
  void Forget(Watch* watch) ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration idle_;
  Clock* const clock_;
  Mutex mu_;
  absl::flat_hash_set<Watch*> watches_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> cancelled_{0};
  Notification stop_;
  std::thread thread_;
};

class StreamIdleReaper::Watch {
 public:
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  // The call moved a message: its idle time starts again.
  void Touch();

 private:
  friend class StreamIdleReaper;
  Watch(StreamIdleReaper* reaper, std::function<void()> cancel, absl::Time now);
  StreamIdleReaper* const reaper_;  // null: inert
  const std::function<void()> cancel_;
  std::atomic<int64_t> last_ns_;  // absl::ToUnixNanos of the last Touch
  bool cancelled_ = false;        // guarded by reaper_->mu_
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_STREAM_IDLE_REAPER_H_
