// PrefixIndex: the blocks cached in one tier, keyed by (namespace, key), with
// each block's parent and cached children, its pins (in-flight readers and
// leases) and its access recency. It maintains the set of evictable blocks,
// ordered coldest first: blocks that are indexed, unpinned and have no cached
// child. Eviction only ever takes from that set, which is what keeps the
// never-strand invariant: a block leaves the tier only as a leaf.
//
// A block may be inserted only when its parent (if any) is indexed in the
// same namespace, and removed only when it has no indexed child. A removed
// block that is still pinned stays alive (owned by the caller) until unpinned.
//
// Thread-safety: not thread-safe; the owner serializes every call.
#ifndef KVTIER_STORAGE_PREFIX_INDEX_H_
#define KVTIER_STORAGE_PREFIX_INDEX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"
#include "storage/slab_allocator.h"

namespace kvtier {

struct BlockRecord {
  NamespaceId ns;
  BlockKey key;
  BlockKey parent_key;  // empty for a root block
  uint64_t size = 0;
  uint64_t checksum = 0;
  SlabAllocator::Slot slot;

  // Maintained by PrefixIndex.
  BlockRecord* parent = nullptr;
  absl::flat_hash_set<BlockRecord*> children;
  uint32_t refs = 0;    // in-flight readers and writers
  uint32_t leases = 0;  // Lookup leases holding this block
  uint64_t last_access = 0;
  bool indexed = false;
  bool evictable = false;

  bool pinned() const { return refs > 0 || leases > 0; }
};

class PrefixIndex {
 public:
  PrefixIndex() = default;
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;
  ~PrefixIndex();

  BlockRecord* Find(const NamespaceId& ns, const BlockKey& key) const;

  // Indexes `record`. FAILED_PRECONDITION if the parent is not indexed,
  // ALREADY_EXISTS if the key is; nothing changes on error.
  absl::Status Insert(std::unique_ptr<BlockRecord> record);

  // Un-indexes a block without children and returns it; the caller frees its
  // slot once it is unpinned. Removing a block with children is a bug.
  std::unique_ptr<BlockRecord> Remove(BlockRecord* record);

  // `root` and all of its indexed descendants, children before parents: the
  // order in which they can be removed.
  std::vector<BlockRecord*> SubtreePostOrder(BlockRecord* root) const;

  // Marks a block as just used.
  void Touch(BlockRecord* record);

  // Pin counts. Valid on indexed and removed (still owned) records.
  void AddRef(BlockRecord* record);
  void DropRef(BlockRecord* record);
  void AddLease(BlockRecord* record);
  void DropLease(BlockRecord* record);

  // The coldest evictable block, restricted to one size class when given.
  BlockRecord* ColdestEvictable(std::optional<uint32_t> size_class) const;

  size_t size() const { return records_.size(); }
  size_t evictable_count() const { return evictable_.size(); }
  // Indexed blocks whose parent key is set but not indexed. Always 0 unless
  // the index is broken; O(n).
  uint64_t CountStranded() const;

  // Evictable blocks, coldest first.
  template <typename Fn>
  void ForEachEvictable(Fn&& fn) const {
    for (const auto& [tick, rec] : evictable_) fn(rec);
  }

  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const auto& [k, rec] : records_) fn(*rec);
  }

 private:
  struct FullKey {
    NamespaceId ns;
    BlockKey key;
    friend bool operator==(const FullKey& a, const FullKey& b) {
      return a.ns == b.ns && a.key == b.key;
    }
    template <typename H>
    friend H AbslHashValue(H h, const FullKey& k) {
      return H::combine(std::move(h), k.ns, k.key);
    }
  };

  void UpdateEvictable(BlockRecord* record);

  absl::flat_hash_map<FullKey, std::unique_ptr<BlockRecord>> records_;
  // last_access -> record; last_access values are unique (a counter).
  std::map<uint64_t, BlockRecord*> evictable_;
  std::vector<std::map<uint64_t, BlockRecord*>> evictable_by_class_;
  uint64_t clock_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_PREFIX_INDEX_H_
