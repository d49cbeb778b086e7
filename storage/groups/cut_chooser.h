// CutChooser: how a hybrid Lookup picks the cut it plans to restore among
// its restorable cuts (storage/groups/restorable_cut.h). The cache lists each
// restorable cut with what restoring it fetches; the chooser (the daemon's
// planner, priced with its cost model) returns one, and the Lookup leases
// that cut's blocks along with the longest cut's.
//
// Thread-safety: BlockCache::Lookup calls Choose under the cache's lock, so
// Choose must not call the cache and should be cheap (O(cuts)).
#ifndef KVTIER_STORAGE_GROUPS_CUT_CHOOSER_H_
#define KVTIER_STORAGE_GROUPS_CUT_CHOOSER_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace kvtier {

// What restoring at one cut fetches: every group's blocks for it (full
// attention [0, cut), the window before it, the snapshot at it), in bytes
// by where each block is read from (a block held on the host and on NVMe
// is read from the host).
struct CutFetch {
  size_t cut = 0;
  uint64_t host_bytes = 0;
  uint64_t nvme_bytes = 0;
};

class CutChooser {
 public:
  virtual ~CutChooser() = default;
  // `cuts`: the restorable cuts of the Lookup, descending, the longest
  // first (at most kMaxPlannedCuts of them, storage/group_table.h) and 0
  // last (nothing fetched). Returns the chosen cut; a value that is not
  // among `cuts` is taken as the longest.
  virtual size_t Choose(absl::Span<const CutFetch> cuts) = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_GROUPS_CUT_CHOOSER_H_
