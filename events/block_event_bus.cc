#include "events/block_event_bus.h"

#include <algorithm>
#include <utility>

#include "spdlog/spdlog.h"
#include "storage/block_cache.h"

namespace kvtier {

// Appends the snapshot straight into the subscription's queue (under the
// cache's lock, before the subscription is registered with the bus).
class BlockEventBus::Subscription::SnapshotSink final : public BlockEventSink {
 public:
  explicit SnapshotSink(Subscription* sub) : sub_(sub) {}
  void OnBlockEvent(const BlockEvent& event) override {
    if (sub_->ns_.has_value() && event.ns != *sub_->ns_) return;
    MutexLock lock(&sub_->mu_);
    sub_->queue_.push_back(event);
    ++sub_->capacity_;
    ++sub_->snapshot_events_;
  }

 private:
  Subscription* const sub_;
};

BlockEventBus::BlockEventBus(Options options, SnapshotFn snapshot)
    : options_(options), snapshot_(std::move(snapshot)) {
  dispatcher_ = std::thread([this] { DispatchLoop(); });
}

BlockEventBus::~BlockEventBus() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  WakeDispatcher();
  dispatcher_.join();
  for (const std::weak_ptr<Subscription>& w : subscribers_) {
    if (std::shared_ptr<Subscription> sub = w.lock()) sub->Lose();
  }
}

void BlockEventBus::OnBlockEvent(const BlockEvent& event) {
  reported_.fetch_add(1, std::memory_order_relaxed);
  bool wake = false;
  {
    MutexLock lock(&mu_);
    const uint64_t seq = next_seq_++;
    if (subscribers_.empty() || overflowed_) return;  // nobody to tell, or all lost
    if (pending_.size() >= options_.max_pending) {
      // The dispatcher is that far behind: every subscriber is lost (at its
      // next pass) and nothing more is kept meanwhile.
      overflowed_ = true;
      pending_.clear();
      pending_.shrink_to_fit();
      wake = true;
    } else {
      // The first event since the dispatcher's last pass wakes it; it takes
      // every later one with it.
      wake = pending_.empty();
      pending_.push_back(Sequenced{seq, event});
    }
  }
  if (wake) WakeDispatcher();
}

void BlockEventBus::WakeDispatcher() {
  MutexLock lock(&wake_mu_);
  wake_ = true;
}

std::shared_ptr<BlockEventBus::Subscription> BlockEventBus::Subscribe(std::optional<NamespaceId> ns,
                                                                      bool snapshot,
                                                                      std::function<void()> wake) {
  auto sub =
      std::make_shared<Subscription>(std::move(ns), options_.subscriber_capacity, std::move(wake));
  auto enroll = [&] {
    MutexLock lock(&mu_);
    sub->start_seq_ = next_seq_;
    subscribers_.push_back(sub);
  };
  if (snapshot) {
    Subscription::SnapshotSink into(sub.get());
    snapshot_(&into, enroll);
  } else {
    enroll();
  }
  if (snapshot && sub->wake_) sub->wake_();
  return sub;
}

size_t BlockEventBus::subscribers() const {
  MutexLock lock(&mu_);
  return subscribers_.size();
}

void BlockEventBus::DispatchLoop() {
  for (;;) {
    std::vector<Sequenced> batch;
    std::vector<std::shared_ptr<Subscription>> subs;
    bool overflow = false;
    {
      // Woken by the first event since the last pass (or an overflow, or
      // stop); the timeout is a backstop. A wake that comes while the pass
      // below runs makes the next pass start at once.
      MutexLock lock(&wake_mu_);
      wake_mu_.AwaitWithTimeout(Condition(&wake_), options_.backstop);
      wake_ = false;
    }
    {
      MutexLock lock(&mu_);
      if (stop_) return;
      batch.swap(pending_);
      overflow = overflowed_;
      overflowed_ = false;
      // Forget subscriptions that are gone, cancelled or lost.
      std::erase_if(subscribers_, [&](const std::weak_ptr<Subscription>& w) {
        std::shared_ptr<Subscription> sub = w.lock();
        if (sub == nullptr || sub->lost()) return true;
        subs.push_back(std::move(sub));
        return false;
      });
    }
    for (const std::shared_ptr<Subscription>& sub : subs) {
      bool lost_now = false;
      if (overflow) {
        lost_now = sub->Lose();
      } else {
        auto first = std::lower_bound(batch.begin(), batch.end(), sub->start_seq_,
                                      [](const Sequenced& s, uint64_t seq) { return s.seq < seq; });
        if (first == batch.end()) continue;
        lost_now =
            !sub->Append(absl::MakeConstSpan(&*first, static_cast<size_t>(batch.end() - first)));
      }
      if (lost_now) {
        lost_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("block events: a subscriber fell behind and was dropped; it must resubscribe");
      }
      if (sub->wake_) sub->wake_();
    }
  }
}

std::unique_ptr<BlockEventBus> AttachEventBus(BlockCache* cache, BlockEventBus::Options options) {
  auto bus = std::make_unique<BlockEventBus>(
      options, [cache](BlockEventSink* into, absl::FunctionRef<void()> then) {
        cache->SnapshotInto(into, then);
      });
  cache->SetEventSink(bus.get());
  return bus;
}

bool BlockEventBus::Subscription::Append(absl::Span<const Sequenced> events) {
  MutexLock lock(&mu_);
  if (lost_ || cancelled_) return true;  // not lost by this
  for (const Sequenced& s : events) {
    if (ns_.has_value() && s.event.ns != *ns_) continue;
    if (queue_.size() >= capacity_) {
      lost_ = true;
      queue_.clear();
      return false;
    }
    queue_.push_back(s.event);
  }
  return true;
}

bool BlockEventBus::Subscription::Lose() {
  MutexLock lock(&mu_);
  if (lost_ || cancelled_) return false;
  lost_ = true;
  queue_.clear();
  return true;
}

std::vector<BlockEvent> BlockEventBus::Subscription::Take(size_t max) {
  MutexLock lock(&mu_);
  const size_t n = std::min(max, queue_.size());
  std::vector<BlockEvent> out(std::make_move_iterator(queue_.begin()),
                              std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
  if (queue_.empty()) queue_.shrink_to_fit();
  return out;
}

bool BlockEventBus::Subscription::Wait(absl::Duration timeout) {
  MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return lost_ || cancelled_ || !queue_.empty();
  };
  return mu_.AwaitWithTimeout(Condition(&ready), timeout);
}

size_t BlockEventBus::Subscription::snapshot_events() const {
  MutexLock lock(&mu_);
  return snapshot_events_;
}

bool BlockEventBus::Subscription::lost() const {
  MutexLock lock(&mu_);
  return lost_;
}

void BlockEventBus::Subscription::Cancel() {
  MutexLock lock(&mu_);
  cancelled_ = true;
  lost_ = true;  // the bus forgets it
  queue_.clear();
}

}  // namespace kvtier
