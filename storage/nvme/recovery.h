// CatalogReplay: the order in which the blocks a previous run persisted are
// indexed again at open. Parents come before children; an entry whose
// parent is neither recovered nor in the catalog (or that its `admit`
// callback refuses: a slot that cannot be claimed, a block too large) is
// dropped, and so, transitively, are its descendants: nothing recovered is
// ever stranded. A large catalog logs a progress bar.
//
// Thread-safety: externally synchronized (one thread runs a replay; the
// owner holds its mutex across Run, as the callbacks touch its state).
#ifndef KVTIER_STORAGE_NVME_RECOVERY_H_
#define KVTIER_STORAGE_NVME_RECOVERY_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "base/huge_page_allocator.h"
#include "storage/nvme/catalog.h"

namespace kvtier {

struct RecoveryResult {
  uint64_t recovered = 0;
  uint64_t dropped = 0;  // refused, orphaned, or undecodable in the catalog
};

class CatalogReplay {
 public:
  // Every entry of `catalog` (undecodable ones are counted as dropped).
  static absl::StatusOr<CatalogReplay> Read(Catalog& catalog);
  // In huge pages where large (base/huge_page_allocator.h): at 10^7 entries,
  // 1.3 GB read in at once.
  using Entries = std::vector<CatalogEntry, HugePageAllocator<CatalogEntry>>;
  explicit CatalogReplay(Entries entries, uint64_t corrupt = 0)
      : entries_(std::move(entries)), corrupt_(corrupt) {}

  // Offers each entry to `admit` once, every parent before its children;
  // `drop` is called for each entry refused or orphaned. Call once.
  RecoveryResult Run(absl::FunctionRef<bool(const CatalogEntry&)> admit,
                     absl::FunctionRef<void(const CatalogEntry&)> drop);
  // As above; `upcoming` is also called for entries a few places before
  // `admit` may be offered them (a chance to prefetch what admitting them
  // touches). It may be called for an entry that is then not offered.
  RecoveryResult Run(absl::FunctionRef<bool(const CatalogEntry&)> admit,
                     absl::FunctionRef<void(const CatalogEntry&)> drop,
                     absl::FunctionRef<void(const CatalogEntry&)> upcoming);

  size_t size() const { return entries_.size(); }
  // How many entries each namespace has (before any is refused): the room
  // to reserve in the index.
  absl::flat_hash_map<NamespaceId, size_t> CountsByNamespace() const;

 private:
  Entries entries_;
  uint64_t corrupt_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_RECOVERY_H_
