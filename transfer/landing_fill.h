// FillLandingSlots: overwrites the slots a receiver reserved for a peer's
// push with fresh random bytes before it tells the sender where they are.
// Commit indexes a block only when the slot's bytes match the checksum the
// sender claimed (BlockCache::PutBatch::KeepVerifiedPrefix); a slot that
// held zeros, or the bytes of a block freed earlier, would let a caller that
// never wrote a byte get a block indexed by claiming the checksum of what
// the slot already held. With random contents unknown to the caller, only
// a transfer that actually wrote the bytes passes verification.
//
// Thread-safety: thread-safe; each call draws from its own generator.
#ifndef KVTIER_TRANSFER_LANDING_FILL_H_
#define KVTIER_TRANSFER_LANDING_FILL_H_

#include <cstdint>

#include "absl/types/span.h"
#include "transfer/peer_channel.h"

namespace kvtier {

// `slots[i]` (null: the block is already cached, nothing to fill) spans
// `blocks[i].size` bytes.
void FillLandingSlots(absl::Span<uint8_t* const> slots, absl::Span<const PeerBlockInfo> blocks);

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_LANDING_FILL_H_
