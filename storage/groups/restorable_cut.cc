#include "storage/groups/restorable_cut.h"

#include <algorithm>
#include <vector>

namespace kvtier {

KeyRange LoadRange(const GroupRule& rule, size_t k) {
  switch (rule.kind) {
    case GroupKind::kFullAttention:
      return {0, k};
    case GroupKind::kSlidingWindow:
      return {k > rule.window_blocks ? k - rule.window_blocks : 0, k};
    case GroupKind::kRecurrent:
      return k == 0 ? KeyRange{0, 0} : KeyRange{k - 1, k};
  }
  return {0, 0};
}

size_t LongestRestorableCut(absl::Span<const GroupRule> rules, size_t n, size_t full_run,
                            HoldsFn holds) {
  // Probe results per (group, key): -1 unknown, 0 absent, 1 held.
  std::vector<std::vector<int8_t>> memo(rules.size());
  auto held = [&](size_t g, size_t i) {
    if (memo[g].empty()) memo[g].assign(n, -1);
    if (memo[g][i] < 0) memo[g][i] = holds(g, i) ? 1 : 0;
    return memo[g][i] == 1;
  };
  size_t k = std::min(n, full_run);
  while (k > 0) {
    size_t next = k;  // the largest cut not yet ruled out
    for (size_t g = 0; g < rules.size() && next == k; ++g) {
      if (rules[g].kind == GroupKind::kFullAttention) continue;
      const KeyRange need = LoadRange(rules[g], k);
      // From the back: a missing key i rules out every cut whose range
      // holds it, so the next candidate is i itself.
      for (size_t i = need.end; i > need.begin; --i) {
        if (!held(g, i - 1)) {
          next = i - 1;
          break;
        }
      }
    }
    if (next == k) return k;
    k = next;
  }
  return 0;
}

}  // namespace kvtier
