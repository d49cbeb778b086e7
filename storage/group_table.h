// GroupTable: BlockCache's hybrid namespaces (NamespaceSpec::hybrid) as
// cache objects. Each group stores its bytes under its own storage id
// (NamespaceId::OfGroup) in the shared PrefixIndex, so host, NVMe, catalog,
// recovery and checksums treat it as a namespace of its own; full-attention
// groups chain their blocks (key i's parent is key i-1), sliding-window
// blocks and recurrent snapshots are stored as roots. This table knows which
// storage ids belong to which hybrid and enforces invariant 9 on top:
//  - Match: a Lookup's longest restorable cut and what each group loads
//    for it (storage/groups/restorable_cut.h);
//  - sweeps: group bytes that no restorable cut can use are dropped
//    (storage/groups/stranding_sweep.h), after a commit (AfterCommit) and
//    after removals, which HostTier reports here (NoteRemoved) and
//    SweepPending handles; useless bytes that were pinned are retried at
//    the next sweep.
//
// Thread-safety: externally synchronized; REQUIRES: the owner's
// (BlockCache's) mutex held for every call.
#ifndef KVTIER_STORAGE_GROUP_TABLE_H_
#define KVTIER_STORAGE_GROUP_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/groups/cut_chooser.h"
#include "storage/groups/layer_group.h"
#include "storage/groups/restorable_cut.h"
#include "storage/groups/stranding_sweep.h"
#include "storage/namespace_spec.h"
#include "storage/prefix_index.h"

namespace kvtier {

class HostTier;

// One hybrid namespace's groups.
struct HybridGroups {
  NamespaceId id;
  std::vector<LayerGroup> groups;
  std::vector<NamespaceId> storage;  // per group: NamespaceId::OfGroup(id, g)
  std::vector<GroupRule> rules;
  std::optional<size_t> spine;  // the first full-attention group
  std::unique_ptr<StrandingSweep> sweep;
  std::vector<BlockKey> pending;  // keys whose group bytes were removed
};

// The restorable cuts a planned Lookup weighs at most, the longest first:
// bounds the work under the cache's lock (probes, and a price per cut).
inline constexpr size_t kMaxPlannedCuts = 64;

// What a Lookup of a hybrid namespace matched.
struct HybridMatch {
  size_t cut = 0;  // the longest restorable cut
  // The restorable cuts, descending: `cut` first, at most kMaxPlannedCuts
  // of them, then 0; when Match was asked for them, else empty.
  std::vector<size_t> cuts;
  // Per group, by key index: full attention, its matched chain; the other
  // groups, what the cut search found (nullptr where absent or not probed).
  std::vector<std::vector<BlockRecord*>> by_key;

  // Group g's records for a restore at k, one of the restorable cuts found
  // (all held, in key order).
  absl::Span<BlockRecord* const> Load(size_t g, const GroupRule& rule, size_t k) const {
    const KeyRange r = LoadRange(rule, k);
    return absl::MakeConstSpan(by_key[g]).subspan(r.begin, r.size());
  }
};

// Per-group stranded bytes of one hybrid, from an exact scan.
struct GroupStranded {
  uint64_t blocks = 0;
  uint64_t bytes = 0;
};

class GroupTable {
 public:
  // `index` and `host` are not owned and must outlive it.
  GroupTable(PrefixIndex* index, HostTier* host) : index_(index), host_(host) {}
  GroupTable(const GroupTable&) = delete;
  GroupTable& operator=(const GroupTable&) = delete;

  // Registers the hybrid `id` of `spec` (idempotent) and sweeps every byte
  // its groups hold (blocks recovered from NVMe may be unusable). Returns
  // the group blocks dropped.
  uint64_t Open(const NamespaceId& id, const NamespaceSpec& spec);
  const HybridGroups* Find(const NamespaceId& id) const;

  // The longest restorable cut of `keys` and what each group loads for it;
  // with `all_cuts`, every restorable cut as well.
  HybridMatch Match(const HybridGroups& h, absl::Span<const BlockKey> keys,
                    bool all_cuts = false) const;
  // What restoring at each of m.cuts fetches, in that order.
  std::vector<CutFetch> Fetches(const HybridGroups& h, const HybridMatch& m) const;

  // After a Put committed `keys` (of any of its groups) to hybrid `id`:
  // drops what no cut can use among them. Returns the blocks dropped.
  uint64_t AfterCommit(const NamespaceId& id, absl::Span<const BlockKey> keys);
  // HostTier's report of a removed record (ignored unless it is a group's).
  void NoteRemoved(const BlockRecord& record);
  // Sweeps what the removals noted since the last sweep (and pinned bytes
  // kept by earlier sweeps) may have stranded. Returns the blocks dropped.
  uint64_t SweepPending();
  bool has_pending() const { return pending_hybrids_ > 0; }

  // Forgets hybrid `id` (closed, its groups hold no blocks): sweeps of it
  // end, and a re-open registers it anew.
  void Forget(const NamespaceId& id);

  // Exact per-group stranded bytes of `h` (O(its blocks * widest window)).
  std::vector<GroupStranded> CountStranded(const HybridGroups& h) const;

  uint64_t dropped_total() const { return dropped_total_; }

 private:
  uint64_t Run(HybridGroups* h, absl::Span<const BlockKey> keys, bool removed);

  PrefixIndex* const index_;
  HostTier* const host_;
  absl::flat_hash_map<NamespaceId, std::unique_ptr<HybridGroups>> hybrids_;
  // Storage id -> (its hybrid, group index).
  absl::flat_hash_map<NamespaceId, std::pair<HybridGroups*, uint32_t>> by_storage_;
  size_t pending_hybrids_ = 0;  // hybrids with pending keys
  bool sweeping_ = false;       // removals during a sweep are its own
  uint64_t dropped_total_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_GROUP_TABLE_H_
