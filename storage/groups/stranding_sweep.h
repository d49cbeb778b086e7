// StrandingSweep: keeps a hybrid namespace free of stranded bytes
// (invariant 9): bytes of a group that no restorable cut can use (a
// snapshot whose attention prefix or window is gone, a sliding-window block
// outside the window of every restorable cut, full-attention blocks past
// the last restorable cut of their branch). See restorable_cut.h for cuts.
//
// Positions form a tree: the chain of the namespace's first full-attention
// group (the spine; key i's parent is key i-1). A namespace of recurrent
// groups alone has no spine: each key stands alone. Bytes of group g at
// key x are useful when
//   full attention:  x has a child in g, or x is a restorable cut (with
//                    no stranded bytes below, a child's subtree ends in
//                    restorable cuts);
//   sliding window:  a restorable cut lies at x or below it on the spine,
//                    less than window_blocks steps down;
//   recurrent:       x is a restorable cut.
// Dropping useless bytes never changes which cuts are restorable (a cut
// that used them would make them useful), so one sweep decides against a
// fixed set of cuts; only full-attention leaves cascade upward.
//
// Thread-safety: the sweep runs under the owner's serialization of `store`.
#ifndef KVTIER_STORAGE_GROUPS_STRANDING_SWEEP_H_
#define KVTIER_STORAGE_GROUPS_STRANDING_SWEEP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/groups/restorable_cut.h"

namespace kvtier {

// One hybrid namespace's groups as the sweep reads and changes them.
class GroupStore {
 public:
  virtual ~GroupStore() = default;
  virtual bool Holds(size_t group, const BlockKey& key) = 0;
  // The spine parent of `key`: nullopt for a root or a key off the spine.
  virtual std::optional<BlockKey> SpineParent(const BlockKey& key) = 0;
  // Appends the spine children of `key` to `out`.
  virtual void SpineChildren(const BlockKey& key, std::vector<BlockKey>* out) = 0;
  // A full-attention group's block at `key`: whether it has a child in the
  // group, and its parent there (nullopt for a root).
  virtual bool HasChildren(size_t group, const BlockKey& key) = 0;
  virtual std::optional<BlockKey> Parent(size_t group, const BlockKey& key) = 0;
  virtual bool Pinned(size_t group, const BlockKey& key) = 0;
  // Drops the group's (unpinned, for full attention childless) bytes at
  // `key` from every tier.
  virtual void Drop(size_t group, const BlockKey& key) = 0;
};

struct SweepResult {
  uint64_t dropped = 0;  // group blocks dropped
  // Useless bytes the sweep could not drop because they were pinned; the
  // owner sweeps them again later (as removed keys).
  std::vector<BlockKey> pinned;
};

class StrandingSweep {
 public:
  // `rules`: one per group, in the namespace's group order.
  explicit StrandingSweep(absl::Span<const GroupRule> rules);

  // After bytes were stored at `keys`: drops those of them no cut can use
  // (and the full-attention blocks above them that only they kept).
  SweepResult AfterAdd(GroupStore* store, absl::Span<const BlockKey> keys) const;
  // After bytes were removed at `keys` (pass a removed spine leaf's parent
  // too): drops what only the cuts lost with them used.
  SweepResult AfterRemove(GroupStore* store, absl::Span<const BlockKey> keys) const;

  // Whether group g's bytes at `key` are useful, as defined above.
  bool Useful(GroupStore* store, size_t group, const BlockKey& key) const;
  bool Restorable(GroupStore* store, const BlockKey& key) const;

 private:
  SweepResult Run(GroupStore* store, absl::Span<const BlockKey> keys, bool neighbourhood) const;

  std::vector<GroupRule> rules_;
  std::optional<size_t> spine_;  // the first full-attention group
  uint32_t reach_ = 1;           // the widest window, in blocks (at least 1)
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_GROUPS_STRANDING_SWEEP_H_
