// PeerSource: the source side of PeerTransfer, for a daemon whose role sends
// blocks (prefill or both).
//  - Push (engine-facing): reads the cached prefix of the keys, has the peer
//    Stage slots for them, puts the bytes straight into those slots over the
//    Transport, and Commits the number of blocks that arrived whole; the
//    receiver indexes only the verified prefix.
//  - Export (peer-facing, serving a peer's pull): pins the cached prefix of
//    the keys and describes where its bytes are, for the peer to get them.
//    The caller keeps the pins (ExportEntry) in its PendingTable until the
//    peer's ReleaseExport or the entry's expiry.
// The caller checks role, keys and the peer address before calling.
//
// Thread-safety: thread-safe; it holds no state of its own (the peer
// registry and the cache are thread-safe).
#ifndef KVTIER_TRANSFER_PEER_SOURCE_H_
#define KVTIER_TRANSFER_PEER_SOURCE_H_

#include <memory>
#include <string>
#include <utility>

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

class PeerSource {
 public:
  struct Exported {
    ExportResult result;                 // export_id left for the caller to set
    std::unique_ptr<ExportEntry> entry;  // null when nothing is cached
  };

  explicit PeerSource(PeerSide side) : side_(std::move(side)) {}
  PeerSource(const PeerSource&) = delete;
  PeerSource& operator=(const PeerSource&) = delete;

  // NOT_FOUND for a namespace not open here; otherwise one status per key.
  absl::StatusOr<TransferOutcome> Push(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                       const std::string& target, absl::Time deadline);

  // Pins the cached prefix of `keys` for `ttl` (clamped to 1 s..max_hold).
  // ABORTED when the blocks change while being pinned.
  absl::StatusOr<Exported> Export(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                  absl::Duration ttl);

 private:
  const PeerSide side_;
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_SOURCE_H_
