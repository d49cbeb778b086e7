// Restorable cuts of a hybrid namespace (invariant 9). Keys name prefix
// positions: key i is the position after block i, and a cut k (0 <= k <= n
// for a request of n keys) resumes the prompt at token k * tokens_per_block.
// Group g can restore at cut k when it holds:
//   full attention:  its bytes at keys [0, k);
//   sliding window:  its bytes at keys [k - window_blocks, k) (from 0 when
//                    k is smaller): the blocks covering the last w tokens;
//   recurrent:       its snapshot at key k - 1 (the state after block k-1).
// Cut 0 (recompute everything) is always restorable. A cut is restorable when
// every group can restore at it.
//
// Thread-safety: pure functions.
#ifndef KVTIER_STORAGE_GROUPS_RESTORABLE_CUT_H_
#define KVTIER_STORAGE_GROUPS_RESTORABLE_CUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "storage/groups/layer_group.h"

namespace kvtier {

// What the cut rules need of a group.
struct GroupRule {
  GroupKind kind = GroupKind::kFullAttention;
  uint32_t window_blocks = 0;  // kSlidingWindow: ceil(w / tokens_per_block), >= 1
};

// Keys [begin, end) of a request.
struct KeyRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  friend bool operator==(const KeyRange& a, const KeyRange& b) {
    return a.begin == b.begin && a.end == b.end;
  }
};

// The keys group `rule` loads for a restore at cut k.
KeyRange LoadRange(const GroupRule& rule, size_t k);

// holds(g, i): group g holds its bytes at key i. Called only for groups that
// are not full attention, and at most once per (g, i).
using HoldsFn = absl::FunctionRef<bool(size_t group, size_t key_index)>;

// The longest restorable cut in [0, min(n, full_run)], where full_run is
// the leading run of keys every full-attention group holds (the caller
// matches those chains itself; pass n when there are none). O(n) probes.
size_t LongestRestorableCut(absl::Span<const GroupRule> rules, size_t n, size_t full_run,
                            HoldsFn holds);

// The restorable cuts in the same range, descending from the longest: up to
// `max_cuts` of them other than 0, then 0 (always restorable). Each key is
// probed at most once per group: O(n) probes.
std::vector<size_t> RestorableCuts(absl::Span<const GroupRule> rules, size_t n, size_t full_run,
                                   size_t max_cuts, HoldsFn holds);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_GROUPS_RESTORABLE_CUT_H_
