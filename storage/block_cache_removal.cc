// BlockCache's removals: Delete, CloseNamespace and operator Evict, and the
// batched, children-first removal they share (see block_cache.h). One piece
// of the BlockCache class, in its own file so that the removal rules (never
// strand, let other callers in between batches) read in one place.
#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"
#include "storage/block_cache.h"

namespace kvtier {

absl::StatusOr<CloseResult> BlockCache::CloseNamespace(const NamespaceId& ns, bool drop_blocks) {
  CloseResult result;
  // Where the blocks are: the namespace, or each group of a hybrid one.
  std::vector<NamespaceId> storage;
  std::vector<std::vector<BlockKey>> orders;  // drop_blocks: children first
  {
    MutexLock lock(&mu_);
    absl::StatusOr<NamespaceEntry*> entry = namespaces_.FindOpen(ns);
    if (!entry.ok()) return entry.status();
    if ((*entry)->spec.hybrid()) {
      for (uint32_t g = 0; g < (*entry)->spec.groups.size(); ++g) {
        storage.push_back(NamespaceId::OfGroup(ns, g));
      }
    } else {
      storage.push_back(ns);
    }
    std::vector<std::string> ended = leases_.IdsIn(ns);
    for (std::string& id : ended) DropLeaseLocked(std::move(id));
    result.leases_released = static_cast<uint32_t>(ended.size());
    namespaces_.Close(ns);  // erases it (and its groups) now if it holds no blocks
    if (drop_blocks) {
      // Only this namespace's blocks: O(its blocks), never a scan of all.
      for (const NamespaceId& id : storage) {
        std::vector<BlockRecord*> doomed;
        PostOrderLocked(index_.Roots(id), /*may_nest=*/false, &doomed);
        std::vector<BlockKey>& order = orders.emplace_back();
        order.reserve(doomed.size());
        for (BlockRecord* rec : doomed) order.push_back(rec->key);
      }
    }
  }
  // In batches, as Delete; a concurrent re-open of the namespace ends it.
  for (size_t i = 0; i < orders.size(); ++i) {
    result.blocks_dropped +=
        RemoveInBatches(storage[i], orders[i], /*stop_if_opened=*/true).blocks_deleted;
  }
  MutexLock lock(&mu_);
  for (const NamespaceId& id : storage) {
    const NamespaceEntry* left = namespaces_.FindAny(id);
    result.blocks_kept += left == nullptr ? 0 : left->blocks;
  }
  // A closed hybrid that holds nothing any more: its groups go too (a
  // re-open registers them again). One that keeps blocks stays known, so
  // their removals are still swept.
  if (result.blocks_kept == 0 && !(storage.size() == 1 && storage[0] == ns) &&
      namespaces_.FindAny(ns) == nullptr) {
    groups_.Forget(ns);
  }
  return result;
}

absl::StatusOr<DeleteResult> BlockCache::Delete(const NamespaceId& ns,
                                                absl::Span<const BlockKey> keys, bool recursive) {
  RETURN_IF_ERROR(CheckKeyCount(keys.size()));
  // Phase 1, in one short hold of the lock: validate the whole request and
  // list what goes, children before parents. O(blocks deleted).
  std::vector<BlockKey> order;
  std::vector<GroupRemoval> hybrid;  // a hybrid namespace's, per group
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked();
    ASSIGN_OR_RETURN(NamespaceEntry * entry, namespaces_.FindOpen(ns));
    if (entry->spec.hybrid()) {
      ASSIGN_OR_RETURN(hybrid, PlanHybridDeleteLocked(ns, keys, recursive));
    }
  }
  if (!hybrid.empty()) {
    DeleteResult result;
    for (const GroupRemoval& r : hybrid) {
      DeleteResult part = RemoveInBatches(r.storage, r.order, /*stop_if_opened=*/false);
      result.blocks_deleted += part.blocks_deleted;
      result.bytes_freed += part.bytes_freed;
    }
    return result;
  }
  {
    MutexLock lock(&mu_);
    ExpireLeasesLocked();
    RETURN_IF_ERROR(namespaces_.FindOpen(ns).status());
    std::vector<BlockRecord*> roots;
    absl::flat_hash_set<BlockRecord*> named;
    named.reserve(keys.size());
    for (const BlockKey& key : keys) {
      BlockRecord* rec = index_.Find(ns, key);
      if (rec == nullptr) {
        return absl::NotFoundError(absl::StrCat("block ", key.ToHex(), " is not cached"));
      }
      if (named.insert(rec).second) roots.push_back(rec);
    }
    if (!recursive) {
      for (BlockRecord* rec : roots) {
        for (BlockRecord* child : rec->children()) {
          if (!named.contains(child)) {
            return absl::FailedPreconditionError(
                absl::StrCat("block ", rec->key.ToHex(), " has cached child ", child->key.ToHex(),
                             "; delete it too or set recursive"));
          }
        }
      }
    }
    // Without `recursive` every child is named, as just checked, so the
    // subtrees of the named blocks are exactly the blocks to remove.
    std::vector<BlockRecord*> doomed;
    PostOrderLocked(roots, /*may_nest=*/true, &doomed);
    for (BlockRecord* rec : doomed) {
      if (rec->leases > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("block ", rec->key.ToHex(), " is held by a lease"));
      }
      if (rec->refs > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("block ", rec->key.ToHex(), " is being read or written; retry"));
      }
    }
    order.reserve(doomed.size());
    for (BlockRecord* rec : doomed) order.push_back(rec->key);
  }
  // Phase 2: remove in batches, letting other callers in between.
  return RemoveInBatches(ns, order, /*stop_if_opened=*/false);
}

void BlockCache::PostOrderLocked(absl::Span<BlockRecord* const> roots, bool may_nest,
                                 std::vector<BlockRecord*>* out) {
  // The blocks form a tree, so one root reaches each descendant once; only
  // roots that may lie under one another need a visited set.
  const bool visit = may_nest && roots.size() > 1;
  absl::flat_hash_set<BlockRecord*> visited;
  std::vector<std::pair<BlockRecord*, bool>> stack;
  for (BlockRecord* root : roots) {
    if (visit && visited.contains(root)) continue;
    stack.push_back({root, false});
    while (!stack.empty()) {
      auto [rec, expanded] = stack.back();
      stack.pop_back();
      if (expanded) {
        out->push_back(rec);
        continue;
      }
      if (visit && !visited.insert(rec).second) continue;
      stack.push_back({rec, true});
      for (BlockRecord* child : rec->children()) stack.push_back({child, false});
    }
  }
}

DeleteResult BlockCache::RemoveInBatches(const NamespaceId& ns, absl::Span<const BlockKey> order,
                                         bool stop_if_opened) {
  // A long chain must not stall the daemon: the lock is released (and other
  // callers let in) every kDeleteBatch blocks. A block that a concurrent
  // call pinned, extended or removed meanwhile is left to it (and so are its
  // ancestors, which keep a cached child): the removal raced with that call
  // and lost.
  DeleteResult result;
  for (size_t at = 0; at < order.size();) {
    // Let waiters take the lock: a waiter woken on another core needs a
    // moment, and Mutex would hand the lock straight back to us.
    if (at > 0) absl::SleepFor(absl::Microseconds(50));
    MutexLock lock(&mu_);
    if (stop_if_opened) {
      const NamespaceEntry* entry = namespaces_.FindAny(ns);
      if (entry == nullptr || entry->opened) break;
    }
    uint32_t removed = 0;
    for (const size_t end = std::min(order.size(), at + kDeleteBatch); at < end; ++at) {
      BlockRecord* rec = index_.Find(ns, order[at]);
      if (rec == nullptr || rec->pinned() || !rec->children().empty()) continue;
      removed += 1;
      result.bytes_freed += rec->size;
      host_.Remove(rec);
    }
    result.blocks_deleted += removed;
    counters_.blocks_deleted += removed;
    SweepGroupsLocked();
  }
  return result;
}

EvictResult BlockCache::Evict(const std::optional<NamespaceId>& ns, size_t max_blocks) {
  MutexLock lock(&mu_);
  ExpireLeasesLocked();
  // One pass finds the unpinned leaves in scope; removing a leaf may make its
  // parent one, so each removal walks up its chain. O(blocks) per call, with
  // no per-block depth walk.
  uint64_t in_scope = 0;
  std::vector<BlockRecord*> leaves;
  // A hybrid namespace's blocks are its groups'.
  absl::flat_hash_set<NamespaceId> scope;
  if (ns.has_value()) {
    scope.insert(*ns);
    if (const HybridGroups* h = groups_.Find(*ns))
      scope.insert(h->storage.begin(), h->storage.end());
  }
  index_.ForEachMutable([&](BlockRecord& r) {
    if (ns.has_value() && !scope.contains(r.ns)) return;
    ++in_scope;
    if (r.children().empty() && !r.pinned()) leaves.push_back(&r);
  });
  EvictResult result;
  // A record in `leaves` has no children, so no chain walk reaches it: each
  // is removed only when its turn comes, never before.
  for (BlockRecord* rec : leaves) {
    while (rec != nullptr && result.blocks_evicted < max_blocks && rec->children().empty() &&
           !rec->pinned()) {
      BlockRecord* parent = rec->parent;
      result.blocks_evicted += 1;
      result.bytes_freed += rec->size;
      host_.Remove(rec);
      rec = parent;
    }
    if (result.blocks_evicted >= max_blocks) break;
  }
  result.blocks_left = in_scope - result.blocks_evicted;
  counters_.blocks_deleted += result.blocks_evicted;
  // Group bytes that only the evicted blocks' cuts used go too (counted as
  // group_blocks_unusable; a later call sees what is left).
  SweepGroupsLocked();
  return result;
}

}  // namespace kvtier
