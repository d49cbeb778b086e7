// PrefixIndex: the blocks cached by the daemon, keyed by (namespace, key),
// with each block's parent and cached children, where it resides (host
// arena, NVMe, or both), its pins (in-flight readers and writers, leases) and
// its access recency. It keeps three sets of reclamation candidates, each
// ordered coldest first by the EvictionPolicy's priority (then recency):
//   kHostOnlyLeaf:  unpinned leaves held only in host memory; reclaiming one
//                   drops the block entirely;
//   kHostCopy:      unpinned blocks held in host memory and on NVMe;
//                   reclaiming one frees the host copy only (any shape);
//   kNvmeOnlyLeaf:  unpinned leaves held only on NVMe; reclaiming one drops
//                   the block entirely.
// A block leaves its last tier only as a leaf, which is the never-strand
// invariant; the sets are the only source of victims. The policy orders the
// sets; it cannot put a block in them (storage/eviction/eviction_policy.h).
//
// A block may be inserted only when its parent (if any) is indexed in the
// same namespace, and removed only when it has no indexed child. A removed
// block that is still pinned stays alive (owned by the caller) until unpinned.
//
// Thread-safety: not thread-safe; the owner serializes every call.
#ifndef KVTIER_STORAGE_PREFIX_INDEX_H_
#define KVTIER_STORAGE_PREFIX_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
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
  BlockRecord* parent = nullptr;          // maintained by PrefixIndex
  uint64_t size = 0;
  uint64_t last_access = 0;  // maintained by PrefixIndex
  uint32_t uses = 0;         // Put, Lookup hits and Gets: drives NVMe admission
  // Recompute seconds a hit on it saves per byte (its namespace's value;
  // 0: none known), set by the owner before Insert. (Here and refs below:
  // in what would be padding.)
  float value = 0;

  NamespaceId ns;
  BlockKey parent_key;  // empty for a root block
  uint32_t refs = 0;    // in-flight readers, writers and movers
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
  uint32_t leases = 0;           // Lookup leases holding this block
  uint32_t candidate_class = 0;  // host size class it is filed under
  uint64_t filed_at = 0;         // the last_access it is filed under
  // The EvictionPolicy's clock at the last use, and the priority the block
  // is filed under with filed_at (maintained by PrefixIndex).
  double clock_at_use = 0;
  double priority = 0;

  bool pinned() const { return refs > 0 || leases > 0; }
};
static_assert(offsetof(BlockRecord, uses) + sizeof(uint32_t) <= kBlockRecordHotBytes,
              "the fields every Lookup touches lie in the record's first 72 bytes");
static_assert(sizeof(BlockRecord) <= 240,
              "a record fits a 256-byte malloc chunk (10^7 of them are 2.5 GB)");

inline ChildRange::Iterator& ChildRange::Iterator::operator++() {
  at_ = at_->next_sibling;
  return *this;
}

inline size_t ChildRange::size() const {
  size_t n = 0;
  for (BlockRecord* c = first_; c != nullptr; c = c->next_sibling) ++n;
  return n;
}

class PrefixIndex {
 public:
  // `policy` (not owned; null: leaf-restricted LRU) orders the candidates.
  explicit PrefixIndex(EvictionPolicy* policy = nullptr);
  PrefixIndex(const PrefixIndex&) = delete;
  PrefixIndex& operator=(const PrefixIndex&) = delete;
  ~PrefixIndex();

  BlockRecord* Find(const NamespaceId& ns, const BlockKey& key) const;

  // Appends to `out` the records of the longest leading run of `keys` that
  // is a cached chain: keys[0] is indexed, and each next key is indexed as
  // the child of the record before it. Returns the run's length. The walk of
  // every Lookup: one namespace probe, then one probe per key.
  size_t MatchChain(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                    std::vector<BlockRecord*>* out) const;

  // Indexes `record`. FAILED_PRECONDITION if the parent is not indexed,
  // ALREADY_EXISTS if the key is; nothing changes on error.
  absl::Status Insert(std::unique_ptr<BlockRecord> record);

  // Makes room for `blocks` blocks of `ns` in all, so that indexing them
  // rehashes nothing (a recovery knows its counts: at 10^7 blocks, growing
  // the table by doubling moves every entry about twice). The room may leave
  // `ns` with an empty table until ReleaseUnusedRoom.
  void Reserve(const NamespaceId& ns, size_t blocks) { tables_[ns].blocks.reserve(blocks); }
  // A hint, for a caller that knows its next inserts: starts fetching the
  // table memory an Insert of `key` will probe, so that the Insert does not
  // wait on it (at 10^7 blocks, two cache misses were most of an Insert).
  // Changes nothing.
  void PrefetchInsert(const NamespaceId& ns, const BlockKey& key) const {
    auto it = tables_.find(ns);
    if (it != tables_.end()) it->second.blocks.prefetch(key);
  }
  // Gives back what Reserve set aside and no block used: drops empty tables
  // and shrinks tables to their blocks.
  void ReleaseUnusedRoom();

  // Bulk loading, for a recovery that indexes many blocks at once. Between
  // BeginBulkLoad and EndBulkLoad, Insert files no block in the candidate
  // sets; EndBulkLoad files each block inserted meanwhile, in insertion
  // order, as Insert would have (priced as of EndBulkLoad, when the policy
  // has seen every insert). Indexing a chain one block at a time files each
  // block as a leaf and unfiles it when its child comes: four B-tree
  // updates per block that the bulk load does not make.
  // Until EndBulkLoad the candidate sets lack the blocks inserted since
  // BeginBulkLoad. REQUIRES: no Remove between the two.
  void BeginBulkLoad() { bulk_load_ = true; }
  void EndBulkLoad();

  // Un-indexes a block without children and returns it; the caller frees its
  // slot once it is unpinned. Removing a block with children is a bug.
  std::unique_ptr<BlockRecord> Remove(BlockRecord* record);

  // The indexed blocks of `ns` without a parent: every block of the
  // namespace descends from one of them. O(roots).
  std::vector<BlockRecord*> Roots(const NamespaceId& ns) const;

  // `root` and all of its indexed descendants, children before parents: the
  // order in which they can be removed.
  std::vector<BlockRecord*> SubtreePostOrder(BlockRecord* root) const;

  // Marks a block as just used: O(1), writing only the record's leading
  // bytes. The block is not moved at once but queued; the queue is settled,
  // each block once however often it was touched meanwhile, before the sets
  // are next read in order, the block's sets change, or the policy's clock
  // moves: each queued block is then stamped with the policy's clock (the
  // clock of its last use, since it has not moved since) and, if it is a
  // candidate, refiled. Readers see the exact policy order; a Lookup under
  // no memory pressure pays no set update.
  void Touch(BlockRecord* record) {
    record->last_access = ++clock_;
    if (!record->refile_pending) {
      record->refile_pending = true;
      pending_refiles_.push_back(record);
    }
  }

  // Pin counts. Valid on indexed and removed (still owned) records.
  void AddRef(BlockRecord* record);
  void DropRef(BlockRecord* record);
  void AddLease(BlockRecord* record);
  void DropLease(BlockRecord* record);

  enum Candidate : uint8_t { kHostOnlyLeaf = 0, kHostCopy = 1, kNvmeOnlyLeaf = 2 };
  static constexpr int kNumCandidates = 3;

  // Recomputes a block's candidate sets after its residency changed.
  void Reclassify(BlockRecord* record) { UpdateEvictable(record); }

  // Tells the policy that a tier reclaims `record`, a candidate: its host
  // copy (dropped = false) or the whole block (dropped = true, before
  // Remove), at the lowest priority of the sets it is in (a tier may pick a
  // block that is not the lowest: the coldest of one size class, or every
  // block of a slab). Explicit deletes are not reclamations and do not call
  // this.
  void NoteReclaimed(BlockRecord* record, bool dropped);
  const EvictionPolicy& policy() const { return *policy_; }

  // The coldest candidate of a kind, restricted to one host size class when
  // given (host kinds only).
  BlockRecord* Coldest(Candidate kind, std::optional<uint32_t> host_class) const;
  // Candidates of a kind, coldest first. The callbacks of this and
  // ColdestCandidates run under the owner's lock, which the analysis cannot
  // see from here (it checks the lambdas where they are written).
  template <typename Fn>
  void ForEachCandidate(Candidate kind, Fn&& fn) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    RefilePending();
    for (const auto& [filed, rec] : sets_[kind]) fn(rec);
  }
  size_t candidate_count(Candidate kind) const { return sets_[kind].size(); }
  // Up to `max` candidates of a kind, coldest first, among those `keep`
  // accepts; stops looking once it has them.
  template <typename Keep>
  std::vector<BlockRecord*> ColdestCandidates(Candidate kind, size_t max,
                                              Keep&& keep) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    RefilePending();
    std::vector<BlockRecord*> out;
    for (auto it = sets_[kind].begin(); it != sets_[kind].end() && out.size() < max; ++it) {
      if (keep(*it->second)) out.push_back(it->second);
    }
    return out;
  }

  // Host-only unpinned leaves (the blocks host pressure may drop entirely).
  BlockRecord* ColdestEvictable(std::optional<uint32_t> size_class) const {
    return Coldest(kHostOnlyLeaf, size_class);
  }

  size_t size() const { return size_; }
  // The indexed blocks of `ns`.
  size_t CountIn(const NamespaceId& ns) const {
    auto it = tables_.find(ns);
    return it == tables_.end() ? 0 : it->second.blocks.size();
  }
  // The blocks `ns`'s table has room for (see Reserve).
  size_t CapacityIn(const NamespaceId& ns) const {
    auto it = tables_.find(ns);
    return it == tables_.end() ? 0 : it->second.blocks.capacity();
  }
  size_t evictable_count() const {
    return sets_[kHostOnlyLeaf].size() + sets_[kHostCopy].size() + sets_[kNvmeOnlyLeaf].size();
  }
  // Indexed blocks whose parent key is set but not indexed. Always 0 unless
  // the index is broken; O(n).
  uint64_t CountStranded(uint64_t* bytes = nullptr) const;

  // Host-only unpinned leaves, coldest first.
  template <typename Fn>
  void ForEachEvictable(Fn&& fn) const {
    ForEachCandidate(kHostOnlyLeaf, fn);
  }

  template <typename Fn>
  void ForEach(Fn&& fn) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& [ns, table] : tables_) {
      for (const auto& rec : table.blocks) fn(static_cast<const BlockRecord&>(*rec));
    }
  }
  // The blocks of one namespace.
  template <typename Fn>
  void ForEachIn(const NamespaceId& ns, Fn&& fn) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto it = tables_.find(ns);
    if (it == tables_.end()) return;
    for (const auto& rec : it->second.blocks) fn(static_cast<const BlockRecord&>(*rec));
  }
  template <typename Fn>
  void ForEachMutable(Fn&& fn) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto& [ns, table] : tables_) {
      for (const auto& rec : table.blocks) fn(*rec);
    }
  }

 private:
  // One namespace's blocks. A namespace's table exists while it has blocks
  // (or was reserved, until ReleaseUnusedRoom).
  // The blocks of a table are keyed by their records' keys: a slot holds
  // the record's pointer alone (8 bytes; with a copy of the key beside it,
  // 48), so the table is a sixth of the memory, more of it stays in cache,
  // and a found key's record is read anyway. Found by BlockKey.
  struct ByRecordKey {
    using is_transparent = void;
    static const BlockKey& KeyOf(const BlockKey& k) { return k; }
    static const BlockKey& KeyOf(const std::unique_ptr<BlockRecord>& r) { return r->key; }
    template <typename A>
    size_t operator()(const A& a) const {
      return absl::Hash<BlockKey>{}(KeyOf(a));
    }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return KeyOf(a) == KeyOf(b);
    }
  };
  struct Table {
    absl::flat_hash_set<std::unique_ptr<BlockRecord>, ByRecordKey, ByRecordKey> blocks;
    absl::flat_hash_set<BlockRecord*> roots;  // see Roots
  };

  // Refiles every queued touched block (see Touch). Logically const: the
  // order it settles is the one the sets already stand for.
  void RefilePending() const;
  void Refile(BlockRecord* record) const;
  void UpdateEvictable(BlockRecord* record);
  void SetCandidates(BlockRecord* record, uint8_t want);

  // Keyed by namespace first, so a walk hashes its namespace once and each
  // key probe hashes and compares the block key alone.
  absl::flat_hash_map<NamespaceId, Table> tables_;
  size_t size_ = 0;
  // Per candidate kind: (priority, last_access) -> record (last_access
  // values are unique, a counter), and for the host kinds the same per host
  // size class. B-trees: a refile moves a record within each set it is in,
  // which costs a node allocation and a rebalance in a red-black tree.
  using FiledKey = std::pair<double, uint64_t>;
  using CandidateSet = absl::btree_map<FiledKey, BlockRecord*>;
  mutable CandidateSet sets_[kNumCandidates];
  mutable std::vector<CandidateSet> by_class_[kNumCandidates];
  // Blocks touched since the queue was last settled, each once
  // (refile_pending).
  mutable std::vector<BlockRecord*> pending_refiles_;
  uint64_t clock_ = 0;
  // Between BeginBulkLoad and EndBulkLoad: the blocks inserted, unfiled.
  bool bulk_load_ = false;
  std::vector<BlockRecord*> bulk_inserted_;
  std::unique_ptr<EvictionPolicy> own_policy_;  // when none is given
  EvictionPolicy* policy_;
  double policy_clock_;  // policy_->clock(), read after each reclamation
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_PREFIX_INDEX_H_
