// PeerReceiver: the receiver side of PeerTransfer, for a daemon whose role
// takes blocks (decode or both).
//  - Pull (engine-facing): has the peer Export (pin) the cached prefix of
//    the keys, reserves local slots for them (a Landing), gets the bytes
//    straight into those slots over the Transport, indexes the verified
//    prefix and has the peer ReleaseExport.
//  - Stage and Commit (peer-facing, serving a peer's push): Stage reserves
//    slots for the peer's blocks and fills them with random bytes before
//    the peer learns where they are (transfer/landing_fill.h); the caller
//    keeps the StageEntry in its PendingTable until the peer's Commit, which
//    indexes the prefix of blocks that arrived and verify.
// The caller checks role, keys and the peer address before calling.
//
// Thread-safety: thread-safe; it holds no state of its own (the peer
// registry and the cache are thread-safe). A StageEntry is used by one
// thread at a time.
#ifndef KVTIER_TRANSFER_PEER_RECEIVER_H_
#define KVTIER_TRANSFER_PEER_RECEIVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "storage/block_cache.h"
#include "transfer/peer_channel.h"
#include "transfer/peer_registry.h"
#include "transfer/peer_side.h"
#include "transfer/peer_transfer_types.h"
#include "transfer/pending_table.h"
#include "transfer/transport.h"

namespace kvtier {

class PeerReceiver {
 public:
  struct Staged {
    StageResult result;                 // stage_id left for the caller to set
    std::unique_ptr<StageEntry> entry;  // null when no block was staged
  };

  explicit PeerReceiver(PeerSide side) : side_(std::move(side)) {}
  PeerReceiver(const PeerReceiver&) = delete;
  PeerReceiver& operator=(const PeerReceiver&) = delete;

  // NOT_FOUND for a namespace not open here; otherwise one status per key.
  absl::StatusOr<TransferOutcome> Pull(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                       const std::string& target, absl::Time deadline);

  // Reserves and fills slots for the longest prefix of `blocks` that fits,
  // held for `ttl` (clamped to 1 s..max_hold). The namespace's error when
  // it cannot be stored here.
  absl::StatusOr<Staged> Stage(const NamespaceId& ns, absl::Span<const PeerBlockInfo> blocks,
                               absl::Duration ttl);
  // Indexes the verified prefix of the stage's blocks [0, received); one
  // status per staged block (FinishLanding). Slots of blocks not indexed
  // stay with `entry.landing.batch` (held_slots), for the caller to
  // quarantine.
  std::vector<absl::Status> Commit(StageEntry& entry, uint32_t received);

 private:
  const PeerSide side_;
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_RECEIVER_H_
