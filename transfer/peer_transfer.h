// PeerTransfer: prefill-to-decode transfer of cached blocks between daemons.
// Both sides of it are reached through here, in domain types (no gRPC):
//  - engine-facing: Push (this daemon is the source) and Pull (this daemon
//    is the receiver), each returning one status per key;
//  - peer-facing, called by the Peer service for a remote daemon: Hello,
//    Stage and Commit (receiver side of a push), Export and ReleaseExport
//    (source side of a pull).
// Bytes move by the Transport between the two host arenas: the source's
// puts land straight in slots the receiver reserved (push), or the
// receiver's gets fill its reserved slots from the source's pinned blocks
// (pull). The receiver indexes only the prefix of blocks whose bytes all
// arrived and match the checksum the source recorded at their first Put
// (BlockCache::PutBatch::KeepVerifiedPrefix); a failed, cut or timed-out
// transfer leaves nothing half-stored, and both daemons keep serving.
//
// A connection per peer is kept and re-made (Hello + Connect) when the
// transport reports it broken, so a restarted peer is reached again.
//
// PeerTransfer is the facade over its pieces: PeerRegistry (known peers,
// their connections, restart detection, counters), PeerSource (Push,
// Export), PeerReceiver (Pull, Stage, Commit, over a Landing) and
// PendingTable (stages, exports and quarantined slots held for peers, with
// their expiry; guarded by PeerTransfer's mutex). It checks each call's
// role and arguments, and owns the transport and the pending table.
//
// Thread-safety: thread-safe. Transfers to one peer may run concurrently.
#ifndef KVTIER_TRANSFER_PEER_TRANSFER_H_
#define KVTIER_TRANSFER_PEER_TRANSFER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "storage/block_cache.h"
#include "transfer/peer_channel.h"
#include "transfer/peer_receiver.h"
#include "transfer/peer_registry.h"
#include "transfer/peer_source.h"
#include "transfer/peer_transfer_types.h"
#include "transfer/pending_table.h"
#include "transfer/transport.h"

namespace kvtier {

class PeerTransfer {
 public:
  // `transport` null: transfer is unavailable and every call says
  // `unavailable_reason`. Otherwise exposes the cache's host arena through it.
  static absl::StatusOr<std::unique_ptr<PeerTransfer>> Create(BlockCache* cache,
                                                              std::unique_ptr<Transport> transport,
                                                              std::string unavailable_reason,
                                                              PeerChannelFactory channels,
                                                              PeerTransferOptions options);
  ~PeerTransfer();
  PeerTransfer(const PeerTransfer&) = delete;
  PeerTransfer& operator=(const PeerTransfer&) = delete;

  // Engine-facing. UNAVAILABLE without a transport, FAILED_PRECONDITION when
  // the role forbids the direction, INVALID_ARGUMENT for no or too many keys
  // or an empty peer, NOT_FOUND for a namespace not open here. Otherwise
  // one status per key (see TransferResponse in kvcache.proto).
  absl::StatusOr<TransferOutcome> Push(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                       const std::string& peer, absl::Duration timeout);
  absl::StatusOr<TransferOutcome> Pull(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                       const std::string& peer, absl::Duration timeout);

  // Peer-facing.
  absl::StatusOr<PeerHello> Hello(const std::string& caller_id);
  absl::StatusOr<StageResult> Stage(const NamespaceId& ns, std::vector<PeerBlockInfo> blocks,
                                    absl::Duration ttl);
  absl::StatusOr<std::vector<absl::Status>> Commit(const std::string& stage_id, uint32_t received);
  absl::StatusOr<ExportResult> Export(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      absl::Duration ttl);
  absl::Status ReleaseExport(const std::string& export_id);

  // Drops stages and exports past their ttl (the daemon calls it every
  // second; the peer-facing calls also do).
  void ExpireStale() ABSL_LOCKS_EXCLUDED(mu_);
  size_t pending() ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<PeerStats> Peers();
  PeerTransferInfo Info() const;
  const std::string& daemon_id() const { return daemon_id_; }

 private:
  PeerTransfer(BlockCache* cache, std::unique_ptr<Transport> transport,
               std::string unavailable_reason, PeerChannelFactory channels,
               PeerTransferOptions options);
  absl::Status CheckUsable(bool as_source, absl::Span<const BlockKey> keys,
                           const std::string& peer) const;
  absl::Time DeadlineFor(absl::Duration timeout) const;
  std::string NewId() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TooManyPending() const;

  BlockCache* const cache_;
  std::unique_ptr<Transport> transport_;  // reset first at destruction
  const std::string unavailable_reason_;
  const PeerTransferOptions options_;
  ExposedMemory exposed_;

  Mutex mu_;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  PendingTable pending_ ABSL_GUARDED_BY(mu_);

  const std::string daemon_id_;  // after mu_ and bitgen_: made by NewId
  PeerRegistry peers_;
  PeerSource source_;
  PeerReceiver receiver_;
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_TRANSFER_H_
