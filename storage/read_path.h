// ReadPath: BlockCache::Read's work, in phases so that the owner can release
// its mutex around NVMe reads and checksum verification. Pin (locked) pins
// the blocks of a request and reserves host slots for those held only on
// NVMe; Promote (unlocked) reads those from NVMe into their slots; Publish
// (locked) makes the promoted copies the blocks' host copies and drops
// blocks that could not be read; Verify (unlocked) checks host copies
// against their checksums; Finish (locked) drops corrupt blocks and counts
// the read. Pinned blocks keep their host copy, so after Publish every
// pinned block is readable in host memory until it is unpinned.
//
// Thread-safety: externally synchronized; REQUIRES: the owner's
// (BlockCache's) mutex held for Pin, Publish, Finish and DropCorrupt, and
// NOT held for Promote and Verify (they read pinned slots and do I/O).
#ifndef KVTIER_STORAGE_READ_PATH_H_
#define KVTIER_STORAGE_READ_PATH_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/cache_stats.h"
#include "storage/host_tier.h"
#include "storage/namespace_spec.h"
#include "storage/nvme/nvme_store.h"
#include "storage/nvme/nvme_tier.h"
#include "storage/prefix_index.h"
#include "storage/transfer_meter.h"

namespace kvtier {

class ReadPath {
 public:
  using Slot = SlabAllocator::Slot;
  using Allocate = absl::FunctionRef<absl::StatusOr<Slot>(uint64_t)>;

  // The NVMe-only blocks of one read and the host slots reserved for them.
  struct Promotion {
    std::vector<std::pair<BlockRecord*, Slot>> blocks;
    std::vector<NvmeRead> reads;
    std::vector<absl::Status> results;
    bool empty() const { return blocks.empty(); }
  };

  // None owned; `nvme` is null when the tier is off.
  ReadPath(HostTier* host, NvmeTier* nvme, PrefixIndex* index, CacheCounters* counters)
      : host_(host), nvme_(nvme), index_(index), counters_(counters) {}
  ReadPath(const ReadPath&) = delete;
  ReadPath& operator=(const ReadPath&) = delete;

  // Pins, touches and counts a use of each block of `keys` in `ns`, in order
  // (a repeated key is pinned again), and reserves through `allocate` a
  // host slot for each distinct one held only on NVMe. NOT_FOUND if a key is
  // not cached, or the error of `allocate`; nothing stays pinned then.
  absl::StatusOr<std::vector<BlockRecord*>> Pin(const NamespaceId& ns,
                                                absl::Span<const BlockKey> keys, Allocate allocate,
                                                Promotion* promotion);
  // Reads the promotion's blocks from NVMe (verified against their slot
  // headers) and records the time in `meter` when all were read.
  void Promote(Promotion& promotion, TransferMeter* meter);
  // NOT_FOUND, naming the first block, if some could not be read: those are
  // dropped with their cached descendants. The caller still holds its pins.
  absl::Status Publish(Promotion& promotion);
  // The pinned blocks whose host bytes do not match their checksum; records
  // the pass in `meter`.
  std::vector<BlockRecord*> Verify(absl::Span<BlockRecord* const> blocks,
                                   TransferMeter* meter) const;
  // NOT_FOUND, naming the first, if `corrupt` is not empty: each still
  // cached is counted, logged and dropped with its descendants. Otherwise
  // counts the blocks and bytes read.
  absl::Status Finish(absl::Span<BlockRecord* const> blocks,
                      absl::Span<BlockRecord* const> corrupt);
  // A block a caller found corrupt: counted, logged and dropped with its
  // cached descendants, unless already dropped.
  void DropCorrupt(BlockRecord* record);

 private:
  HostTier* const host_;
  NvmeTier* const nvme_;
  PrefixIndex* const index_;
  CacheCounters* const counters_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_READ_PATH_H_
