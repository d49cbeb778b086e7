#include "storage/host_tier.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/group_table.h"
#include "storage/nvme/nvme_tier.h"

namespace kvtier {

HostTier::HostTier(std::unique_ptr<HostArena> arena, std::unique_ptr<SlabAllocator> allocator,
                   PrefixIndex* index, NamespaceTable* namespaces, CacheCounters* counters)
    : arena_(std::move(arena)),
      allocator_(std::move(allocator)),
      index_(index),
      namespaces_(namespaces),
      counters_(counters) {}

HostTier::~HostTier() = default;

absl::StatusOr<HostTier::Slot> HostTier::Allocate(uint64_t size) {
  ASSIGN_OR_RETURN(uint32_t cls, allocator_->ClassFor(size));
  if (std::optional<Slot> slot = allocator_->Allocate(cls)) return *slot;
  // Eviction is bounded: one block of the same class (its slot is reused at
  // once), preferring a host copy of a block that is also on NVMe (nothing is
  // lost), or every block of one slab whose blocks are all reclaimable (the
  // slab returns to the pool). Nothing is evicted unless it makes room.
  if (BlockRecord* copy = index_->Coldest(PrefixIndex::kHostCopy, cls); copy != nullptr) {
    DropHostCopy(copy);
    return *allocator_->Allocate(cls);
  }
  if (BlockRecord* victim = index_->ColdestEvictable(cls); victim != nullptr) {
    Evict(victim);
    ++counters_->evictions;
    return *allocator_->Allocate(cls);
  }
  if (std::optional<uint32_t> slab = ReclaimableSlab(); slab.has_value()) {
    std::vector<BlockRecord*> copies, victims;
    index_->ForEachCandidate(PrefixIndex::kHostCopy, [&](BlockRecord* rec) {
      if (allocator_->SlabOf(rec->slot.offset) == *slab) copies.push_back(rec);
    });
    index_->ForEachEvictable([&](BlockRecord* rec) {
      if (allocator_->SlabOf(rec->slot.offset) == *slab) victims.push_back(rec);
    });
    for (BlockRecord* rec : copies) DropHostCopy(rec);
    for (BlockRecord* rec : victims) {
      Evict(rec);
      ++counters_->evictions;
    }
    return *allocator_->Allocate(cls);
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "host tier is full: no room for a ", size, "-byte block; ", allocator_->used_bytes(), " of ",
      allocator_->capacity(),
      " bytes are held by pinned blocks, blocks with cached children, or other size classes"));
}

std::optional<uint32_t> HostTier::ReclaimableSlab() const {
  // A slab qualifies when every allocated slot in it holds a reclaimable
  // block (a host-only leaf, or a host copy of an NVMe block). Among those,
  // take the one whose most recently used block is coldest.
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint64_t>> per_slab;  // count, newest
  auto count = [&](BlockRecord* rec) {
    auto& [n, newest] = per_slab[allocator_->SlabOf(rec->slot.offset)];
    ++n;
    newest = std::max(newest, rec->last_access);
  };
  index_->ForEachEvictable(count);
  index_->ForEachCandidate(PrefixIndex::kHostCopy, count);
  std::optional<uint32_t> best;
  uint64_t best_newest = 0;
  for (const auto& [slab, stats] : per_slab) {
    if (stats.first != allocator_->SlotsInUse(slab)) continue;
    if (!best.has_value() || stats.second < best_newest) {
      best = slab;
      best_newest = stats.second;
    }
  }
  return best;
}

void HostTier::Report(const BlockRecord& record, BlockEvent::Kind kind, Medium medium) {
  if (events_ == nullptr) return;
  events_->OnBlockEvent(BlockEvent{.kind = kind,
                                   .medium = medium,
                                   .ns = record.ns,
                                   .key = record.key,
                                   .parent = record.parent_key(),
                                   .size = record.size});
}

void HostTier::DropHostCopy(BlockRecord* record) {
  Report(*record, BlockEvent::Kind::kRemoved, Medium::kHost);
  index_->NoteReclaimed(record, /*dropped=*/false);
  allocator_->Free(record->slot);
  record->in_host = false;
  stored_bytes_ -= record->size;
  blocks_ -= 1;
  ++counters_->host_copies_dropped;
  index_->Reclassify(record);
}

void HostTier::AddHostCopy(BlockRecord* record) {
  stored_bytes_ += record->size;
  blocks_ += 1;
  index_->Reclassify(record);
  Report(*record, BlockEvent::Kind::kStored, Medium::kHost);
}

void HostTier::AddBlocks(uint64_t blocks, uint64_t bytes) {
  stored_bytes_ += bytes;
  blocks_ += blocks;
}

void HostTier::Evict(BlockRecord* record) {
  index_->NoteReclaimed(record, /*dropped=*/true);
  namespaces_->CountEviction(record->ns);
  Remove(record);
}

void HostTier::Remove(BlockRecord* record) {
  namespaces_->RemoveBlock(record->ns, record->size);
  if (record->in_host) {
    stored_bytes_ -= record->size;
    blocks_ -= 1;
    Report(*record, BlockEvent::Kind::kRemoved, Medium::kHost);
  }
  if (record->on_nvme) {
    nvme_->Forget(*record);
    Report(*record, BlockEvent::Kind::kRemoved, Medium::kNvme);
  }
  if (groups_ != nullptr) groups_->NoteRemoved(*record);
  std::unique_ptr<BlockRecord> owned = index_->Remove(record);
  if (owned->pinned()) {
    removed_pinned_.emplace(owned.get(), std::move(owned));
  } else {
    FreeStorage(owned.get());
  }
}

void HostTier::FreeStorage(BlockRecord* record) {
  if (record->in_host) allocator_->Free(record->slot);
  if (record->on_nvme) nvme_->FreeSlot(record->nvme);
}

void HostTier::ReleaseIfDead(BlockRecord* record) {
  if (record->indexed || record->pinned()) return;
  auto it = removed_pinned_.find(record);
  if (it == removed_pinned_.end()) return;
  FreeStorage(record);
  removed_pinned_.erase(it);
}

void HostTier::DropSubtree(BlockRecord* root) {
  std::vector<BlockRecord*> order = index_->SubtreePostOrder(root);
  counters_->dropped_descendants += order.size() - 1;
  for (BlockRecord* rec : order) Remove(rec);
}

void HostTier::Unpin(BlockRecord* record) {
  index_->DropRef(record);
  ReleaseIfDead(record);
}

}  // namespace kvtier
