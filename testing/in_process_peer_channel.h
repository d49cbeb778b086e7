// InProcessPeers: daemons' Peer services within one process, for tests. A
// test places a PeerTransfer at an address ("host:port"); the PeerChannels
// from factory() call, at each call, whatever PeerTransfer is at their
// address then, as a gRPC channel reaches whichever daemon listens on its
// port. So a test restarts a peer by placing a new PeerTransfer at the same
// address, and stops one by removing it (calls then end UNAVAILABLE, as an
// unreachable daemon's would). Deadlines are not enforced: the calls are
// direct.
//
// Thread-safety: thread-safe. A PeerTransfer must stay alive while it is
// placed; Remove waits for no call in flight, so tests remove a peer only
// when no transfer with it is running.
#ifndef KVTIER_TESTING_IN_PROCESS_PEER_CHANNEL_H_
#define KVTIER_TESTING_IN_PROCESS_PEER_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "transfer/peer_channel.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

class InProcessPeers {
 public:
  InProcessPeers() = default;
  InProcessPeers(const InProcessPeers&) = delete;
  InProcessPeers& operator=(const InProcessPeers&) = delete;

  // `transfer` (not owned) now answers at `address`, replacing any other.
  void Place(const std::string& address, PeerTransfer* transfer) ABSL_LOCKS_EXCLUDED(mu_);
  // Nothing answers at `address` any more.
  void Remove(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // The PeerTransfer at `address` now; null when none.
  PeerTransfer* At(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls made through the channels so far, all addresses and methods.
  uint64_t calls() ABSL_LOCKS_EXCLUDED(mu_);

  // Channels to the addresses of this object, which must outlive them.
  PeerChannelFactory factory();

 private:
  friend class InProcessPeerChannel;
  // At(address), counting a call.
  PeerTransfer* Call(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  Mutex mu_;
  absl::flat_hash_map<std::string, PeerTransfer*> at_ ABSL_GUARDED_BY(mu_);
  uint64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// A PeerChannel to one address of an InProcessPeers.
class InProcessPeerChannel final : public PeerChannel {
 public:
  InProcessPeerChannel(InProcessPeers* peers, std::string address)
      : peers_(peers), address_(std::move(address)) {}

  absl::StatusOr<PeerHello> Hello(const std::string& caller_id, absl::Time deadline) override;
  absl::StatusOr<StageResult> Stage(const NamespaceId& ns, absl::Span<const PeerBlockInfo> blocks,
                                    absl::Duration ttl, absl::Time deadline) override;
  absl::StatusOr<std::vector<absl::Status>> Commit(const std::string& stage_id, uint32_t received,
                                                   absl::Time deadline) override;
  absl::StatusOr<ExportResult> Export(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      absl::Duration ttl, absl::Time deadline) override;
  absl::Status ReleaseExport(const std::string& export_id, absl::Time deadline) override;

 private:
  absl::Status Unreachable() const;

  InProcessPeers* const peers_;
  const std::string address_;
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_IN_PROCESS_PEER_CHANNEL_H_
