#include "server/watch_blocks_reactor.h"

#include <utility>
#include <vector>

#include "server/async/tsan_handoff.h"

namespace kvtier {
namespace {

void ToProto(const BlockEvent& e, v1::BlockEvent* out) {
  out->set_kind(e.kind == BlockEvent::Kind::kStored ? v1::BlockEvent::STORED
                                                    : v1::BlockEvent::REMOVED);
  out->set_medium(e.medium == Medium::kHost ? v1::BlockEvent::HOST : v1::BlockEvent::NVME);
  out->set_namespace_id(e.ns.ToHex());
  out->set_key(std::string(e.key.bytes()));
  out->set_parent(std::string(e.parent.bytes()));
  out->set_size(e.size);
}

}  // namespace

WatchBlocksReactor::WatchBlocksReactor(grpc::CallbackServerContext* context,
                                       CallLimit::Ticket ticket)
    : context_(context), ticket_(std::move(ticket)) {}

void WatchBlocksReactor::Begin(BlockEventBus* bus, std::optional<NamespaceId> ns, bool snapshot) {
  std::shared_ptr<Link> link = link_;
  // Counted as a wake-up until it returns: a cancel that finishes the call
  // meanwhile cannot delete the reactor under it (OnDone waits).
  {
    MutexLock lock(&link->mu);
    ++link->waking;
  }
  std::shared_ptr<BlockEventBus::Subscription> sub =
      bus->Subscribe(std::move(ns), snapshot, [link] {
        WatchBlocksReactor* r = nullptr;
        {
          MutexLock lock(&link->mu);
          r = link->reactor;
          if (r == nullptr) return;
          ++link->waking;
        }
        r->Pump();
        MutexLock lock(&link->mu);
        --link->waking;
      });
  {
    MutexLock lock(&mu_);
    sub_ = std::move(sub);
    snapshot_left_ = sub_->snapshot_events();
    snapshot_marked_ = !snapshot;
  }
  {
    MutexLock lock(&link->mu);
    if (!link->done) link->reactor = this;
  }
  Pump();
  MutexLock lock(&link->mu);
  --link->waking;
}

void WatchBlocksReactor::Fail(grpc::Status status) {
  {
    MutexLock lock(&mu_);
    finished_ = true;
  }
  HandOff(this);
  Finish(std::move(status));
}

void WatchBlocksReactor::OnWriteDone(bool ok) {
  TakeOver(this);
  {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) cancelled_ = true;  // the client is gone
  }
  Pump();
}

void WatchBlocksReactor::OnCancel() {
  TakeOver(this);
  {
    MutexLock lock(&mu_);
    cancelled_ = true;
  }
  Pump();
}

void WatchBlocksReactor::OnDone() {
  TakeOver(this);
  {
    MutexLock lock(&link_->mu);
    link_->reactor = nullptr;
    link_->done = true;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(link_->mu) { return link_->waking == 0; };
    link_->mu.Await(Condition(&idle));
  }
  {
    MutexLock lock(&mu_);
    if (sub_ != nullptr) sub_->Cancel();
  }
  delete this;
}

void WatchBlocksReactor::Pump() {
  enum { kNothing, kWrite, kFinish, kCancel } step = kNothing;
  grpc::Status status;
  {
    MutexLock lock(&mu_);
    if (finished_ || sub_ == nullptr) return;
    if (writing_) {
      // Lost while a write is stuck behind a client that stopped reading:
      // cancel the call, or it would never end.
      if (!cancel_asked_ && sub_->lost()) {
        cancel_asked_ = true;
        step = kCancel;
      }
    }
  }
  if (step == kCancel) {
    context_->TryCancel();
    return;
  }
  {
    MutexLock lock(&mu_);
    if (writing_ || finished_) return;
    if (cancelled_) {
      finished_ = true;
      step = kFinish;
      status = grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away");
    } else if (sub_->lost()) {
      finished_ = true;
      step = kFinish;
      status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "the watcher read block events too slowly and fell behind; "
                            "watch again with a snapshot");
    } else {
      const size_t max = snapshot_left_ > 0 ? std::min(snapshot_left_, kMaxEventsPerMessage)
                                            : kMaxEventsPerMessage;
      std::vector<BlockEvent> events = sub_->Take(max);
      if (events.empty() && snapshot_marked_) return;  // nothing to say
      current_.Clear();
      for (const BlockEvent& e : events) ToProto(e, current_.add_events());
      snapshot_left_ -= std::min(snapshot_left_, events.size());
      if (!snapshot_marked_ && snapshot_left_ == 0) {
        current_.set_snapshot_done(true);
        snapshot_marked_ = true;
      }
      writing_ = true;
      step = kWrite;
    }
  }
  if (step == kNothing) return;
  HandOff(this);
  if (step == kWrite) {
    StartWrite(&current_);
  } else {
    Finish(status);
  }
}

}  // namespace kvtier
