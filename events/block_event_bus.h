// BlockEventBus: fans the cache's residency events (storage/block_event.h)
// out to subscribers: the ZeroMQ publisher of vLLM-format KV events and
// each Admin.WatchBlocks stream.
//
// The cache reports into the bus under its own lock (OnBlockEvent only
// appends to a queue); a dispatcher thread moves the events to the
// subscribers' queues and wakes them, outside every lock of the cache, so
// a slow subscriber never slows the cache. A subscriber that asks for a
// snapshot first receives a kStored event per block and medium the cache
// holds (BlockCache::SnapshotInto), then every later change: none is
// missed, none is seen twice.
//
// Memory is bounded: a subscriber whose queue is full (it reads too slowly)
// is marked lost, its queue dropped, and it receives nothing more; it
// resubscribes (with a snapshot) to catch up. If the dispatcher itself falls
// max_pending events behind, every subscriber is lost.
//
// Thread-safety: thread-safe. Lock order: the cache's lock, then the bus's,
// then a subscription's; the dispatcher's wake lock is taken alone, last. Subscriptions may outlive
// the bus (they are then lost). Destroy the bus after unsetting it as the cache's sink.
#ifndef KVTIER_EVENTS_BLOCK_EVENT_BUS_H_
#define KVTIER_EVENTS_BLOCK_EVENT_BUS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/mutex.h"
#include "storage/block_event.h"

namespace kvtier {

class BlockCache;

class BlockEventBus final : public BlockEventSink {
 public:
  struct Options {
    // Events a subscriber may have queued beyond its snapshot.
    size_t subscriber_capacity = 1 << 16;
    // Events the dispatcher may have pending.
    size_t max_pending = 1 << 20;
    // How long the dispatcher sleeps at most when nothing wakes it (each
    // first event after a pass, an overflow and the bus's destruction do).
    absl::Duration backstop = absl::Milliseconds(200);
  };
  // How the bus asks for the cache's contents: BlockCache::SnapshotInto.
  using SnapshotFn = std::function<void(BlockEventSink* into, absl::FunctionRef<void()> then)>;

  class Subscription;

  BlockEventBus(Options options, SnapshotFn snapshot);
  ~BlockEventBus() override;
  BlockEventBus(const BlockEventBus&) = delete;
  BlockEventBus& operator=(const BlockEventBus&) = delete;

  // BlockEventSink; called under the cache's lock.
  void OnBlockEvent(const BlockEvent& event) override ABSL_LOCKS_EXCLUDED(mu_, wake_mu_);

  // A new subscriber to the events of `ns` (every namespace when nullopt),
  // with the current contents first if `snapshot`. `wake` (may be empty)
  // runs on the dispatcher thread, outside every lock, whenever the
  // subscription gains events or is lost (and once on the calling thread
  // after a snapshot); it must be quick and must not call Subscribe.
  std::shared_ptr<Subscription> Subscribe(std::optional<NamespaceId> ns, bool snapshot,
                                          std::function<void()> wake = {}) ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t events_reported() const { return reported_.load(std::memory_order_relaxed); }
  uint64_t subscribers_lost() const { return lost_.load(std::memory_order_relaxed); }
  size_t subscribers() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Sequenced {
    uint64_t seq;
    BlockEvent event;
  };
  void DispatchLoop() ABSL_LOCKS_EXCLUDED(mu_, wake_mu_);
  // Wakes the dispatcher (it runs a pass at once).
  void WakeDispatcher() ABSL_LOCKS_EXCLUDED(wake_mu_);

  const Options options_;
  const SnapshotFn snapshot_;
  std::atomic<uint64_t> reported_{0};
  std::atomic<uint64_t> lost_{0};
  mutable Mutex mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Sequenced> pending_ ABSL_GUARDED_BY(mu_);
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;  // pending_ hit max_pending
  std::vector<std::weak_ptr<Subscription>> subscribers_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The dispatcher sleeps on a Mutex of its own, not on mu_: a thread
  // awaiting a Mutex is woken by every Unlock of it (base/mutex.h), and mu_
  // is taken for every event the cache reports, under the cache's lock.
  // Set when pending_ gains its first event, on overflow and on stop.
  Mutex wake_mu_;
  bool wake_ ABSL_GUARDED_BY(wake_mu_) = false;
  std::thread dispatcher_;
};

// A bus for `cache`'s events: it takes its snapshots from the cache
// (BlockCache::SnapshotInto) and is set as the cache's sink. Unset it
// (SetEventSink(nullptr)) before destroying the bus.
std::unique_ptr<BlockEventBus> AttachEventBus(BlockCache* cache,
                                              BlockEventBus::Options options = {});

// One subscriber's queue. Read by one consumer at a time.
class BlockEventBus::Subscription {
 public:
  // Up to `max` queued events, oldest first (empty: none now).
  std::vector<BlockEvent> Take(size_t max) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `timeout` for an event or for the subscription to be lost;
  // true if there is something to Take or it is lost.
  bool Wait(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // It fell behind (or the bus went away): events were dropped, and it
  // receives nothing more. Resubscribe with a snapshot.
  bool lost() const ABSL_LOCKS_EXCLUDED(mu_);
  // Receives nothing more; the bus forgets it at its next dispatch.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  // How many of the first events are the snapshot (0 without one).
  size_t snapshot_events() const ABSL_LOCKS_EXCLUDED(mu_);

  Subscription(std::optional<NamespaceId> ns, size_t capacity, std::function<void()> wake)
      : ns_(std::move(ns)), capacity_(capacity), wake_(std::move(wake)) {}

 private:
  friend class BlockEventBus;
  class SnapshotSink;
  // Appends what passes its filter; false when that overflowed it (it is
  // lost now).
  bool Append(absl::Span<const Sequenced> events) ABSL_LOCKS_EXCLUDED(mu_);
  // Marks it lost; false if it already was (or was cancelled).
  bool Lose() ABSL_LOCKS_EXCLUDED(mu_);

  const std::optional<NamespaceId> ns_;
  size_t capacity_ ABSL_GUARDED_BY(mu_);  // grows by the snapshot's size
  const std::function<void()> wake_;
  uint64_t start_seq_ = 0;  // set before the dispatcher sees it
  mutable Mutex mu_;
  std::deque<BlockEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  size_t snapshot_events_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvtier

#endif  // KVTIER_EVENTS_BLOCK_EVENT_BUS_H_
