// HostTier: BlockCache's host memory tier. Owns the arena and the slab
// allocator carving it, the host residency counts, and the records removed
// from the index while pinned (freed at their last unpin). It allocates
// slots (evicting boundedly to make room), drops host copies of blocks that
// are also on NVMe, removes blocks from the cache (every tier) and manages
// the pins that keep removed records alive.
//
// It updates the shared PrefixIndex, NamespaceTable and CacheCounters that
// BlockCache owns, and the NvmeTier's accounting for a removed block that
// was on NVMe (none when the tier is off). Every residency change it makes
// or is told of (NoteStored) goes to the event sink, if one is set.
//
// Thread-safety: externally synchronized; REQUIRES: the owner's
// (BlockCache's) mutex held for every call except SlotData and arena(),
// which read fixed state (a slot's bytes belong to whoever pins or
// reserved it).
#ifndef KVTIER_STORAGE_HOST_TIER_H_
#define KVTIER_STORAGE_HOST_TIER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/block_event.h"
#include "storage/cache_stats.h"
#include "storage/host_arena.h"
#include "storage/namespace_table.h"
#include "storage/prefix_index.h"
#include "storage/slab_allocator.h"

namespace kvtier {

class GroupTable;
class NvmeTier;

class HostTier {
 public:
  using Slot = SlabAllocator::Slot;

  // `index`, `namespaces` and `counters` are not owned and must outlive it.
  HostTier(std::unique_ptr<HostArena> arena, std::unique_ptr<SlabAllocator> allocator,
           PrefixIndex* index, NamespaceTable* namespaces, CacheCounters* counters);
  ~HostTier();
  HostTier(const HostTier&) = delete;
  HostTier& operator=(const HostTier&) = delete;

  // The NVMe tier whose accounting Remove updates (not owned; null: off).
  void set_nvme(NvmeTier* nvme) { nvme_ = nvme; }
  // Where residency changes are reported (not owned; null: nowhere).
  void set_events(BlockEventSink* events) { events_ = events; }
  // `record` (indexed) became readable from `medium`: a Put's commit, a
  // mover's write. (Promotions report through AddHostCopy.)
  void NoteStored(const BlockRecord& record, Medium medium) {
    Report(record, BlockEvent::Kind::kStored, medium);
  }
  // The hybrid namespaces' groups, told of every removed record (not owned).
  void set_groups(GroupTable* groups) { groups_ = groups; }

  absl::Span<uint8_t> arena() const { return {arena_->data(), arena_->size()}; }
  uint8_t* SlotData(const Slot& slot) const { return arena_->data() + slot.offset; }

  // A slot for `size` bytes. Eviction is bounded and happens only if it
  // makes room: one block of the same class, preferring a host copy of a
  // block also on NVMe, else a host-only leaf; else every block of the
  // coldest slab whose blocks are all reclaimable. RESOURCE_EXHAUSTED if
  // nothing can make room; INVALID_ARGUMENT for a size above every class.
  absl::StatusOr<Slot> Allocate(uint64_t size);
  void Free(const Slot& slot) { allocator_->Free(slot); }

  // Frees the host copy of a block that is also on NVMe: a reclamation (the
  // eviction policy is told, as for Evict).
  void DropHostCopy(BlockRecord* record);
  // A host slot now holds the indexed block (a promotion): counts it.
  void AddHostCopy(BlockRecord* record);
  // Blocks committed by a Put: counts them (and their bytes) as held here.
  void AddBlocks(uint64_t blocks, uint64_t bytes);

  // Un-indexes a leaf and drops it from every tier now, or at its last
  // unpin if pinned.
  void Remove(BlockRecord* record);
  // Remove for a block the tiers evict: counted in its namespace's
  // (a hybrid group's) evictions as well.
  void Evict(BlockRecord* record);
  // Removes `root` and its cached descendants, children first, counting the
  // descendants as dropped.
  void DropSubtree(BlockRecord* root);
  // Drops one pin (a reader's, writer's or mover's).
  void Unpin(BlockRecord* record);
  // Frees a removed record once nothing pins it.
  void ReleaseIfDead(BlockRecord* record);

  uint64_t capacity() const { return allocator_->capacity(); }
  uint64_t used_bytes() const { return allocator_->used_bytes(); }
  uint64_t class_bytes(uint32_t size_class) const { return allocator_->ClassBytes(size_class); }
  uint64_t stored_bytes() const { return stored_bytes_; }
  uint64_t blocks() const { return blocks_; }
  size_t removed_pinned() const { return removed_pinned_.size(); }

 private:
  void Report(const BlockRecord& record, BlockEvent::Kind kind, Medium medium);
  std::optional<uint32_t> ReclaimableSlab() const;
  // Frees whatever a dead (removed and unpinned) record still holds.
  void FreeStorage(BlockRecord* record);

  const std::unique_ptr<HostArena> arena_;
  const std::unique_ptr<SlabAllocator> allocator_;
  PrefixIndex* const index_;
  NamespaceTable* const namespaces_;
  CacheCounters* const counters_;
  NvmeTier* nvme_ = nullptr;
  GroupTable* groups_ = nullptr;
  BlockEventSink* events_ = nullptr;
  // Blocks removed from the index while pinned; freed at their last unpin.
  absl::flat_hash_map<BlockRecord*, std::unique_ptr<BlockRecord>> removed_pinned_;
  uint64_t stored_bytes_ = 0;
  uint64_t blocks_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_HOST_TIER_H_
