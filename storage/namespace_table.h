// NamespaceTable: BlockCache's namespaces, open or known only from blocks
// recovered from NVMe, with their per-namespace block and byte counts (and
// the total over all of them), the namespace limits and NVMe admission.
//
// A namespace known only from recovery is not "open": it serves nothing
// and takes no place in the limits until an engine opens it again (same
// spec, same id); it goes away with its last block.
//
// Thread-safety: externally synchronized; REQUIRES: the owner's
// (BlockCache's) mutex held for every call.
#ifndef KVTIER_STORAGE_NAMESPACE_TABLE_H_
#define KVTIER_STORAGE_NAMESPACE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/namespace_spec.h"
#include "storage/tenant_quotas.h"

namespace kvtier {

// A group entry's place: group `index` of the hybrid namespace `hybrid`.
struct GroupOf {
  NamespaceId hybrid;
  uint32_t index = 0;
};

// A hybrid namespace (NamespaceSpec::hybrid) has an entry of its own, which
// engines address and which holds no blocks, and one group entry per group
// under NamespaceId::OfGroup, which holds that group's blocks and counts. A
// group entry is internal: FindOpen does not return it, it takes no place
// in the limits, and it is open while its hybrid is.
struct NamespaceEntry {
  NamespaceSpec spec;
  uint64_t block_bytes = 0;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  // False for a namespace known only from recovered NVMe blocks, or closed
  // with blocks left.
  bool opened = true;
  bool nvme_admit = true;           // see BlockCache::SetNvmeAdmission
  std::optional<GroupOf> group_of;  // set for a group entry
  uint64_t evictions = 0;           // blocks the tiers evicted (host or NVMe)
  // Recompute seconds a hit saves per byte (BlockCache::SetRetentionValue);
  // 0: not known.
  double retention_value = 0;
};

struct OpenedNamespace {
  uint64_t block_bytes = 0;
  bool created = false;  // false: already open, or re-opened
};

class NamespaceTable {
 public:
  // `quotas` (not owned) is charged a namespace per open, refunded at close.
  NamespaceTable(uint32_t max_namespaces, TenantQuotas* quotas)
      : max_namespaces_(max_namespaces), quotas_(quotas) {}
  NamespaceTable(const NamespaceTable&) = delete;
  NamespaceTable& operator=(const NamespaceTable&) = delete;

  // Opens `spec` (normalized, valid) as `id`; idempotent. RESOURCE_EXHAUSTED
  // past max_namespaces or the tenant's share.
  absl::StatusOr<OpenedNamespace> Open(const NamespaceId& id, NamespaceSpec spec,
                                       uint64_t block_bytes);
  // Opens (or re-opens) the group entries of the hybrid namespace `id`,
  // opened just before: `block_bytes[g]` for group g. No limit applies.
  void OpenGroups(const NamespaceId& id, const NamespaceSpec& spec,
                  const std::vector<uint64_t>& block_bytes);
  // The namespace if open (a group entry never is); NOT_FOUND
  // (NamespaceNotOpenError) otherwise.
  absl::StatusOr<NamespaceEntry*> FindOpen(const NamespaceId& id);
  // The namespace open or not; nullptr if unknown.
  NamespaceEntry* FindAny(const NamespaceId& id);
  // Closes an open namespace (refunds its tenant), and the group entries of
  // a hybrid one; erases each entry that holds no blocks. The caller checked
  // that it is open.
  void Close(const NamespaceId& id);
  // NOT_FOUND if unknown (open or not).
  absl::Status SetNvmeAdmission(const NamespaceId& id, bool admit);
  // Whether the mover may write the blocks of `id` (true if unknown).
  bool AdmitsNvme(const NamespaceId& id) const;
  // Sets the retention value of `id` and of its groups. NOT_FOUND if unknown.
  absl::Status SetRetentionValue(const NamespaceId& id, double seconds_per_byte);
  // The geometric mean of the known retention values of the namespaces
  // engines opened (0 when none is known): what a block of a namespace
  // without one is worth.
  double MeanRetentionValue() const;

  // Block accounting. AddRecoveredBlock creates an unopened entry for an
  // unknown namespace; RemoveBlock erases an unopened one with its last.
  void AddBlocks(NamespaceEntry* entry, uint64_t blocks, uint64_t bytes);
  void AddRecoveredBlock(const NamespaceId& id, uint64_t bytes);
  void RemoveBlock(const NamespaceId& id, uint64_t bytes);
  // Before an evicted block's RemoveBlock: counts it in its namespace.
  void CountEviction(const NamespaceId& id);

  size_t open_count() const;  // the namespaces an engine opened (not group entries)
  uint64_t total_bytes() const { return total_bytes_; }  // over all entries
  const absl::flat_hash_map<NamespaceId, NamespaceEntry>& entries() const { return entries_; }

 private:
  // Applies `set` to the entry of `id` and to its group entries; NOT_FOUND
  // if unknown.
  absl::Status SetWithGroups(const NamespaceId& id,
                             const std::function<void(NamespaceEntry&)>& set);

  const uint32_t max_namespaces_;
  TenantQuotas* const quotas_;
  absl::flat_hash_map<NamespaceId, NamespaceEntry> entries_;
  uint64_t total_bytes_ = 0;
};

// NOT_FOUND: `ns` is not open (or not the caller's: the same answer).
absl::Status NamespaceNotOpenError(const NamespaceId& ns);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NAMESPACE_TABLE_H_
