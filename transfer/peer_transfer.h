// PeerTransfer: prefill-to-decode transfer of cached blocks between daemons.
// Both sides of it live here, in domain types (no gRPC):
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
// Thread-safety: thread-safe. Transfers to one peer may run concurrently.
#ifndef KVTIER_TRANSFER_PEER_TRANSFER_H_
#define KVTIER_TRANSFER_PEER_TRANSFER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "storage/block_cache.h"
#include "transfer/peer_channel.h"
#include "transfer/transport.h"

namespace kvtier {

// Which directions a daemon serves. A prefill daemon is a source (Push,
// Export); a decode daemon is a receiver (Pull, Stage); both is both.
enum class PeerRole { kPrefill, kDecode, kBoth };
absl::StatusOr<PeerRole> ParsePeerRole(absl::string_view name);
const char* PeerRoleName(PeerRole role);

struct PeerTransferOptions {
  PeerRole role = PeerRole::kBoth;
  // A transfer's deadline when the engine names none.
  absl::Duration timeout = absl::Seconds(10);
  // Longest a receiver keeps staged slots, or a source keeps blocks pinned
  // for a peer, whatever the peer asks. Peers ask for twice their deadline
  // plus 5 s, and a deadline is at most 10 minutes.
  absl::Duration max_hold = absl::Minutes(25);
  // How long a receiver keeps the slots of blocks a push did not complete
  // before reusing them (bytes of a failed sender may still be in flight).
  absl::Duration quarantine = absl::Seconds(10);
  // Stages plus exports held for peers at once.
  uint32_t max_pending = 1024;
  uint32_t max_keys = 65536;
  // The peer addresses transfers may name (as given, "host:port"); empty =
  // any. A daemon that presents credentials to its peers must list them, or
  // an engine could have it send them to an address of its choosing.
  std::vector<std::string> allowed_peers;
};

struct TransferOutcome {
  std::vector<absl::Status> blocks;  // one per key
  std::vector<uint64_t> sizes;       // bytes of each block (0 if unknown)
  uint64_t bytes_moved = 0;
  double transport_seconds = 0;
  std::string lanes;
};

struct PeerStats {
  std::string address;
  std::string daemon_id;
  std::string role;
  std::string lanes;
  bool connected = false;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t blocks_sent = 0;
  uint64_t blocks_received = 0;
  uint64_t transfers = 0;
  uint64_t failed_transfers = 0;
  double transport_seconds = 0;
  uint64_t connects = 0;
  std::string last_error;
};

struct PeerTransferInfo {
  bool available = false;
  std::string detail;
  PeerRole role = PeerRole::kBoth;
  TransportCapabilities transport;
};

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

  std::vector<PeerStats> Peers() ABSL_LOCKS_EXCLUDED(peers_mu_);
  PeerTransferInfo Info() const;
  const std::string& daemon_id() const { return daemon_id_; }

 private:
  struct Peer;
  struct Link;
  struct Landing;
  struct StageEntry;
  struct ExportEntry;

  PeerTransfer(BlockCache* cache, std::unique_ptr<Transport> transport,
               std::string unavailable_reason, PeerChannelFactory channels,
               PeerTransferOptions options);
  absl::Status CheckUsable(bool as_source, absl::Span<const BlockKey> keys,
                           const std::string& peer) const;
  // The peer's entry with a live connection, (re)connecting as needed.
  absl::StatusOr<Link> Connected(const std::string& target, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(peers_mu_);
  // The peer answered Stage or Export from another instance than the one
  // connected to (it restarted): drop the connection so the next transfer
  // says Hello again.
  absl::Status CheckSameInstance(Link& link, const std::string& answered_by)
      ABSL_LOCKS_EXCLUDED(peers_mu_);
  // Reserves local slots for `blocks` (the longest prefix that fits).
  absl::StatusOr<Landing> PrepareLanding(const NamespaceId& ns,
                                         absl::Span<const PeerBlockInfo> blocks);
  // Verifies and indexes blocks [0, received) of a landing; one status per
  // landing block.
  std::vector<absl::Status> FinishLanding(Landing& landing, size_t received);
  void Record(Peer& peer, bool sent, const TransferOutcome& outcome, size_t blocks_ok,
              const absl::Status& error) ABSL_LOCKS_EXCLUDED(peers_mu_);
  std::string NewId() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TooManyPending() const;

  BlockCache* const cache_;
  std::unique_ptr<Transport> transport_;  // reset first at destruction
  const std::string unavailable_reason_;
  const PeerChannelFactory channels_;
  const PeerTransferOptions options_;
  std::string daemon_id_;
  ExposedMemory exposed_;

  Mutex mu_;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<StageEntry>> stages_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<ExportEntry>> exports_ ABSL_GUARDED_BY(mu_);
  // Batches whose dropped slots wait out options_.quarantine.
  std::vector<std::pair<absl::Time, std::unique_ptr<BlockCache::PutBatch>>> quarantine_
      ABSL_GUARDED_BY(mu_);

  Mutex peers_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Peer>> peers_ ABSL_GUARDED_BY(peers_mu_);
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_TRANSFER_H_
