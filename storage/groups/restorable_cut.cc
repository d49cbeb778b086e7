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

namespace {

// The restorable-cut search of one request, each (group, key) probed at most
// once.
class CutSearch {
 public:
  CutSearch(absl::Span<const GroupRule> rules, size_t n, HoldsFn holds)
      : rules_(rules), n_(n), holds_(holds), memo_(rules.size()) {}

  // The largest restorable cut <= k.
  size_t AtOrBelow(size_t k) {
    while (k > 0) {
      size_t next = k;  // the largest cut not yet ruled out
      for (size_t g = 0; g < rules_.size() && next == k; ++g) {
        if (rules_[g].kind == GroupKind::kFullAttention) continue;
        const KeyRange need = LoadRange(rules_[g], k);
        // From the back: a missing key i rules out every cut whose range
        // holds it, so the next candidate is i itself.
        for (size_t i = need.end; i > need.begin; --i) {
          if (!Held(g, i - 1)) {
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

 private:
  bool Held(size_t g, size_t i) {
    // Probe results per (group, key): -1 unknown, 0 absent, 1 held.
    if (memo_[g].empty()) memo_[g].assign(n_, -1);
    if (memo_[g][i] < 0) memo_[g][i] = holds_(g, i) ? 1 : 0;
    return memo_[g][i] == 1;
  }

  absl::Span<const GroupRule> rules_;
  size_t n_;
  HoldsFn holds_;
  std::vector<std::vector<int8_t>> memo_;
};

}  // namespace

size_t LongestRestorableCut(absl::Span<const GroupRule> rules, size_t n, size_t full_run,
                            HoldsFn holds) {
  return CutSearch(rules, n, holds).AtOrBelow(std::min(n, full_run));
}

std::vector<size_t> RestorableCuts(absl::Span<const GroupRule> rules, size_t n, size_t full_run,
                                   size_t max_cuts, HoldsFn holds) {
  CutSearch search(rules, n, holds);
  std::vector<size_t> cuts;
  size_t k = std::min(n, full_run);
  while (cuts.size() < max_cuts && (k = search.AtOrBelow(k)) > 0) cuts.push_back(k--);
  cuts.push_back(0);
  return cuts;
}

}  // namespace kvtier
