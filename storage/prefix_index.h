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
#include "storage/block_record.h"
#include "storage/eviction/eviction_policy.h"
#include "storage/namespace_spec.h"
#include "storage/nvme/nvme_store.h"
#include "storage/record_table.h"
#include "storage/slab_allocator.h"

namespace kvtier {

class PrefixIndex {
 public:
  // `policy` (not owned; null: leaf-restricted LRU) orders the candidates.
  // `tag_bits` below 64 (tests only) makes keys share the tags by which the
  // tables find them (storage/record_table.h).
  explicit PrefixIndex(EvictionPolicy* policy = nullptr, int tag_bits = 64);
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

  // Indexes `record` as the child of `parent_key` in its namespace (empty:
  // a root). FAILED_PRECONDITION if the parent is not indexed,
  // ALREADY_EXISTS if the key is; nothing changes on error.
  absl::Status Insert(std::unique_ptr<BlockRecord> record, const BlockKey& parent_key = {});

  // Makes room for `blocks` blocks of `ns` in all, so that indexing them
  // rehashes nothing (a recovery knows its counts: at 10^7 blocks, growing
  // the table by doubling moves every entry about twice). The room may leave
  // `ns` with an empty table until ReleaseUnusedRoom.
  void Reserve(const NamespaceId& ns, size_t blocks) { TableOf(ns).blocks.reserve(blocks); }
  // A hint, for a caller that knows its next inserts: starts fetching the
  // table memory an Insert of `key` will probe, so that the Insert does not
  // wait on it (at 10^7 blocks, two cache misses were most of an Insert).
  // Changes nothing.
  void PrefetchInsert(const NamespaceId& ns, const BlockKey& key) const {
    auto it = tables_.find(ns);
    if (it != tables_.end()) it->second.blocks.PrefetchInsert(key);
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
      table.blocks.ForEach([&](BlockRecord& rec) { fn(static_cast<const BlockRecord&>(rec)); });
    }
  }
  // The blocks of one namespace.
  template <typename Fn>
  void ForEachIn(const NamespaceId& ns, Fn&& fn) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto it = tables_.find(ns);
    if (it == tables_.end()) return;
    it->second.blocks.ForEach([&](BlockRecord& rec) { fn(static_cast<const BlockRecord&>(rec)); });
  }
  template <typename Fn>
  void ForEachMutable(Fn&& fn) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto& [ns, table] : tables_) table.blocks.ForEach(fn);
  }

 private:
  // One namespace's blocks. A namespace's table exists while it has blocks
  // (or was reserved, until ReleaseUnusedRoom).
  struct Table {
    Table(uint64_t seed, int tag_bits) : blocks(seed, tag_bits) {}
    RecordTable blocks;
    absl::flat_hash_set<BlockRecord*> roots;  // see Roots
  };
  Table& TableOf(const NamespaceId& ns) {
    return tables_.try_emplace(ns, tag_seed_, tag_bits_).first->second;
  }

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
  int tag_bits_;
  uint64_t tag_seed_;  // the tables' (a table's tags are of no use elsewhere)
  std::unique_ptr<EvictionPolicy> own_policy_;  // when none is given
  EvictionPolicy* policy_;
  double policy_clock_;  // policy_->clock(), read after each reclamation
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_PREFIX_INDEX_H_
