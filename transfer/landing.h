// Landing: the slots a receiver reserved in its cache for the blocks of one
// transfer (a peer's push it staged, or its own pull), held in an open
// BlockCache::PutBatch until the bytes arrived. PrepareLanding reserves the
// longest prefix of the blocks that fits; FinishLanding verifies the blocks
// that arrived against the checksum the source recorded and indexes only
// the verified prefix, so a failed, cut or torn transfer leaves nothing
// half-stored.
//
// Thread-safety: a Landing is used by one thread at a time; the functions
// are as thread-safe as BlockCache (which is).
#ifndef KVTIER_TRANSFER_LANDING_H_
#define KVTIER_TRANSFER_LANDING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/block_cache.h"
#include "transfer/peer_channel.h"

namespace kvtier {

struct Landing {
  std::unique_ptr<BlockCache::PutBatch> batch;
  std::vector<PeerBlockInfo> blocks;  // the reserved prefix; address = local slot
  std::vector<uint8_t*> slots;        // null when already cached
  absl::Status refused;               // why blocks[blocks.size()] was not reserved
};

// Reserves local slots for `blocks` (the longest prefix that fits). The
// namespace's error, annotated, when `cache` cannot store `ns`.
absl::StatusOr<Landing> PrepareLanding(BlockCache& cache, const NamespaceId& ns,
                                       absl::Span<const PeerBlockInfo> blocks);

// Verifies and indexes blocks [0, received) of a landing; one status per
// landing block: OK (indexed), DATA_LOSS (the first block whose bytes do
// not match), UNAVAILABLE (the first block that did not arrive), ABORTED
// (after one of those). Slots of blocks not indexed stay held by the batch
// (BlockCache::PutBatch::held_slots).
std::vector<absl::Status> FinishLanding(Landing& landing, size_t received);

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_LANDING_H_
