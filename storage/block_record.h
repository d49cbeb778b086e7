// BlockRecord: what the daemon knows of one cached block (its key, parent,
// residency, pins, recency and eviction filing), owned by the PrefixIndex
// that indexes it (storage/prefix_index.h), and ChildRange, the view of a
// record's cached children.
#ifndef KVTIER_STORAGE_BLOCK_RECORD_H_
#define KVTIER_STORAGE_BLOCK_RECORD_H_

#include <cstddef>
#include <cstdint>

#include "storage/block_key.h"
#include "storage/eviction/eviction_policy.h"
#include "storage/namespace_spec.h"
#include "storage/nvme/nvme_store.h"
#include "storage/slab_allocator.h"

namespace kvtier {

struct BlockRecord;

// The leading bytes of a BlockRecord that a Lookup touches (see below).
inline constexpr size_t kBlockRecordHotBytes = 72;

// The cached children of a block, in no particular order: a forward range
// over its intrusive child list. Valid until the index changes.
class ChildRange {
 public:
  class Iterator {
   public:
    explicit Iterator(BlockRecord* at) : at_(at) {}
    BlockRecord* operator*() const { return at_; }
    Iterator& operator++();
    bool operator==(const Iterator& o) const { return at_ == o.at_; }

   private:
    BlockRecord* at_;
  };
  explicit ChildRange(BlockRecord* first) : first_(first) {}
  Iterator begin() const { return Iterator(first_); }
  Iterator end() const { return Iterator(nullptr); }
  bool empty() const { return first_ == nullptr; }
  size_t size() const;  // O(children)

 private:
  BlockRecord* first_;
};

// Field order: what every Lookup reads and writes of a matched block comes
// first, within the record's first 72 bytes: for a record at malloc's 16-byte
// alignment they span at most two cache lines, which PrefixIndex::MatchChain
// prefetches.
struct BlockRecord {
  BlockKey key;
  bool in_host = true;  // residency, set by the owner (see below)
  bool on_nvme = false;
  bool indexed = false;                   // maintained by PrefixIndex
  uint8_t candidate_of = 0;               // bit per PrefixIndex::Candidate it is in
  bool refile_pending = false;            // touched since filed: see PrefixIndex::Touch
  uint8_t retention = kDefaultRetention;  // the engine's retention priority, 0..100
  // The host size class it is filed under (maintained by PrefixIndex; below
  // SlabAllocator::kMaxClasses).
  uint8_t candidate_class = 0;
  BlockRecord* parent = nullptr;  // maintained by PrefixIndex
  uint64_t size = 0;
  uint64_t last_access = 0;  // maintained by PrefixIndex
  uint32_t uses = 0;         // Put, Lookup hits and Gets: drives NVMe admission
  // Recompute seconds a hit on it saves per byte (its namespace's value;
  // 0: none known), set by the owner before Insert. (Here: in what would be
  // padding.)
  float value = 0;

  NamespaceId ns;
  uint32_t refs = 0;    // in-flight readers, writers and movers
  uint32_t leases = 0;  // Lookup leases holding this block
  uint64_t checksum = 0;

  // Residency, set by the owner; call PrefixIndex::Reclassify after a change.
  SlabAllocator::Slot slot;  // host arena slot, valid while in_host
  NvmeSlot nvme;             // valid while on_nvme
  uint64_t nvme_sequence = 0;

  // Maintained by PrefixIndex: the cached children, an intrusive list (three
  // pointers per block instead of a set per block).
  ChildRange children() const { return ChildRange(first_child); }
  BlockRecord* first_child = nullptr;
  BlockRecord* next_sibling = nullptr;
  BlockRecord* prev_sibling = nullptr;
  uint64_t filed_at = 0;  // the last_access it is filed under
  // The EvictionPolicy's clock at the last use, and the priority the block
  // is filed under with filed_at (maintained by PrefixIndex).
  double clock_at_use = 0;
  double priority = 0;

  bool pinned() const { return refs > 0 || leases > 0; }
  // The parent's key: empty for a root, and once the record is no longer
  // indexed (Remove unlinks it from its parent). A record not yet indexed
  // has its parent named to PrefixIndex::Insert.
  BlockKey parent_key() const { return parent != nullptr ? parent->key : BlockKey(); }
};
static_assert(offsetof(BlockRecord, uses) + sizeof(uint32_t) <= kBlockRecordHotBytes,
              "the fields every Lookup touches lie in the record's first 72 bytes");
// The parent's key is not kept beside the parent pointer (parent_key()),
// slots are 8 bytes (SlabAllocator::Slot) and the size class a byte: a
// 192-byte malloc chunk (glibc adds 8 bytes and rounds up to 16).
static_assert(sizeof(BlockRecord) <= 184,
              "a record fits a 192-byte malloc chunk (10^7 of them are 1.92 GB)");
static_assert(SlabAllocator::kMaxClasses <= 256, "candidate_class holds any size class");

inline ChildRange::Iterator& ChildRange::Iterator::operator++() {
  at_ = at_->next_sibling;
  return *this;
}

inline size_t ChildRange::size() const {
  size_t n = 0;
  for (BlockRecord* c = first_; c != nullptr; c = c->next_sibling) ++n;
  return n;
}

}  // namespace kvtier

#endif  // KVTIER_STORAGE_BLOCK_RECORD_H_
