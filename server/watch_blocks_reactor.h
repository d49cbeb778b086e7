// WatchBlocksReactor: one Admin.WatchBlocks call. It writes a BlockEventBus
// subscription to the client as BlockEvents messages, one write in flight;
// the bus's wake-up and each finished write start the next. The snapshot,
// if asked for, comes first and its last message is marked snapshot_done
// (an empty marked message for an empty cache). It ends the call with
// RESOURCE_EXHAUSTED when the subscription is lost (the client read too
// slowly; if a write is still stuck behind it, the call is cancelled), and
// ends it when the client cancels.
//
// Lifetime: gRPC owns it (deleted at OnDone). The bus's wake-up reaches it
// through a link that OnDone severs, waiting out a wake-up in progress.
#ifndef KVTIER_SERVER_WATCH_BLOCKS_REACTOR_H_
#define KVTIER_SERVER_WATCH_BLOCKS_REACTOR_H_

#include <memory>
#include <optional>

#include "base/mutex.h"
#include "events/block_event_bus.h"
#include "grpcpp/grpcpp.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "server/async/call_executor.h"

namespace kvtier {

class WatchBlocksReactor final : public grpc::ServerWriteReactor<v1::BlockEvents> {
 public:
  // Events per message at most.
  static constexpr size_t kMaxEventsPerMessage = 4096;

  WatchBlocksReactor(grpc::CallbackServerContext* context, CallLimit::Ticket ticket);

  // Subscribes (running the snapshot, O(blocks), on the calling thread) and
  // starts writing. Call once, unless Fail was called.
  void Begin(BlockEventBus* bus, std::optional<NamespaceId> ns, bool snapshot);
  // Ends the call with `status` before anything was written.
  void Fail(grpc::Status status);

 private:
  struct Link {
    Mutex mu;
    WatchBlocksReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
    int waking ABSL_GUARDED_BY(mu) = 0;  // wake-ups (and Begin) using the reactor
    bool done ABSL_GUARDED_BY(mu) = false;
  };

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  // Writes the next message, or finishes, unless a write is in flight.
  void Pump() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::CallbackServerContext* const context_;
  CallLimit::Ticket ticket_;
  const std::shared_ptr<Link> link_ = std::make_shared<Link>();
  Mutex mu_;
  std::shared_ptr<BlockEventBus::Subscription> sub_ ABSL_GUARDED_BY(mu_);  // set by Begin
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool cancel_asked_ ABSL_GUARDED_BY(mu_) = false;  // TryCancel for a stuck, lost watcher
  size_t snapshot_left_ ABSL_GUARDED_BY(mu_) = 0;   // snapshot events not yet written
  bool snapshot_marked_ ABSL_GUARDED_BY(mu_) = true;
  v1::BlockEvents current_;  // the message being written (the writer's own)
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_WATCH_BLOCKS_REACTOR_H_
