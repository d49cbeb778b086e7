#include "storage/groups/stranding_sweep.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace kvtier {
namespace {

using RestorableMemo = absl::flat_hash_map<BlockKey, bool>;

}  // namespace

StrandingSweep::StrandingSweep(absl::Span<const GroupRule> rules)
    : rules_(rules.begin(), rules.end()) {
  for (size_t g = 0; g < rules_.size(); ++g) {
    if (rules_[g].kind == GroupKind::kFullAttention && !spine_) spine_ = g;
    reach_ = std::max(reach_, rules_[g].window_blocks);
  }
}

bool StrandingSweep::Restorable(GroupStore* store, const BlockKey& key) const {
  if (spine_ && !store->Holds(*spine_, key)) return false;
  for (size_t g = 0; g < rules_.size(); ++g) {
    switch (rules_[g].kind) {
      case GroupKind::kFullAttention:
      case GroupKind::kRecurrent:
        if (!store->Holds(g, key)) return false;
        break;
      case GroupKind::kSlidingWindow: {
        BlockKey at = key;
        for (uint32_t step = 0; step < rules_[g].window_blocks; ++step) {
          if (!store->Holds(g, at)) return false;
          std::optional<BlockKey> parent = store->SpineParent(at);
          if (!parent) break;  // the window reaches the prompt's start
          at = *parent;
        }
        break;
      }
    }
  }
  return true;
}

namespace {

// Restorable, memoized for one sweep (the set of cuts is fixed during it),
// and the distance down the spine to the nearest restorable cut.
class Cuts {
 public:
  Cuts(const StrandingSweep* sweep, GroupStore* store) : sweep_(sweep), store_(store) {}
  bool At(const BlockKey& key) {
    auto [it, inserted] = memo_.try_emplace(key, false);
    if (inserted) it->second = sweep_->Restorable(store_, key);
    return it->second;
  }

  // The spine steps from `key` down to the nearest restorable cut at or
  // below it, or cap + 1 when none lies within cap steps. Memoized with the
  // cap it was computed under, so a window block's check costs O(1) after
  // the first in its neighbourhood (never a walk per block).
  uint32_t NearestBelow(const BlockKey& key, uint32_t cap) {
    if (auto it = nearest_.find(key); it != nearest_.end()) {
      const auto [dist, under] = it->second;
      if (dist <= under || under >= cap) return std::min(dist, cap + 1);
    }
    uint32_t dist = At(key) ? 0 : cap + 1;
    if (dist > 0 && cap > 0) {
      std::vector<BlockKey> children;
      store_->SpineChildren(key, &children);
      for (const BlockKey& c : children) dist = std::min(dist, 1 + NearestBelow(c, cap - 1));
    }
    nearest_[key] = {dist, cap};
    return dist;
  }

 private:
  const StrandingSweep* sweep_;
  GroupStore* store_;
  RestorableMemo memo_;
  absl::flat_hash_map<BlockKey, std::pair<uint32_t, uint32_t>> nearest_;  // distance, cap
};

bool UsefulWith(const std::vector<GroupRule>& rules, std::optional<size_t> spine, GroupStore* store,
                Cuts* cuts, size_t g, const BlockKey& key) {
  switch (rules[g].kind) {
    case GroupKind::kFullAttention:
      return store->HasChildren(g, key) || cuts->At(key);
    case GroupKind::kRecurrent:
      return cuts->At(key);
    case GroupKind::kSlidingWindow:
      return spine && store->Holds(*spine, key) &&
             cuts->NearestBelow(key, rules[g].window_blocks - 1) < rules[g].window_blocks;
  }
  return false;
}

}  // namespace

bool StrandingSweep::Useful(GroupStore* store, size_t group, const BlockKey& key) const {
  Cuts cuts(this, store);
  return UsefulWith(rules_, spine_, store, &cuts, group, key);
}

SweepResult StrandingSweep::AfterAdd(GroupStore* store, absl::Span<const BlockKey> keys) const {
  return Run(store, keys, /*neighbourhood=*/false);
}

SweepResult StrandingSweep::AfterRemove(GroupStore* store, absl::Span<const BlockKey> keys) const {
  return Run(store, keys, /*neighbourhood=*/true);
}

SweepResult StrandingSweep::Run(GroupStore* store, absl::Span<const BlockKey> keys,
                                bool neighbourhood) const {
  SweepResult result;
  Cuts cuts(this, store);
  std::deque<BlockKey> work;
  absl::flat_hash_set<BlockKey> queued;
  auto enqueue = [&](const BlockKey& k) {
    if (queued.insert(k).second) work.push_back(k);
  };
  // The keys whose bytes a lost cut may have used: the cuts that used bytes
  // removed at x lie at x or below it within the widest window, and each
  // such cut used bytes up to that window above it. Walks stop where a
  // key was already reached with at least the same budget left.
  absl::flat_hash_map<BlockKey, uint32_t> down_budget, up_budget;
  auto walk_up = [&](BlockKey at, uint32_t budget) {
    while (true) {
      auto [it, inserted] = up_budget.try_emplace(at, budget);
      if (!inserted) {
        if (it->second >= budget) return;
        it->second = budget;
      }
      enqueue(at);
      if (budget <= 1 || !spine_) return;
      std::optional<BlockKey> parent = store->SpineParent(at);
      if (!parent) return;
      at = std::move(*parent);
      --budget;
    }
  };
  std::vector<BlockKey> children;
  for (const BlockKey& key : keys) {
    if (!neighbourhood) {
      enqueue(key);
      continue;
    }
    std::vector<std::pair<BlockKey, uint32_t>> stack = {{key, reach_}};
    while (!stack.empty()) {
      auto [at, budget] = std::move(stack.back());
      stack.pop_back();
      auto [it, inserted] = down_budget.try_emplace(at, budget);
      if (!inserted) {
        if (it->second >= budget) continue;
        it->second = budget;
      }
      walk_up(at, reach_);
      if (budget <= 1 || !spine_) continue;
      children.clear();
      store->SpineChildren(at, &children);
      for (BlockKey& c : children) stack.emplace_back(std::move(c), budget - 1);
    }
  }
  // Groups in the order recurrent, sliding window, full attention: a
  // full-attention leaf goes last, once nothing else at its key needs it.
  std::vector<size_t> order(rules_.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = g;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto rank = [&](size_t g) {
      return rules_[g].kind == GroupKind::kRecurrent       ? 0
             : rules_[g].kind == GroupKind::kSlidingWindow ? 1
                                                           : 2;
    };
    return rank(a) < rank(b);
  });
  while (!work.empty()) {
    BlockKey at = std::move(work.front());
    work.pop_front();
    bool pinned_kept = false;
    for (size_t g : order) {
      if (!store->Holds(g, at) || UsefulWith(rules_, spine_, store, &cuts, g, at)) continue;
      if (store->Pinned(g, at)) {
        pinned_kept = true;
        continue;
      }
      std::optional<BlockKey> parent;
      if (rules_[g].kind == GroupKind::kFullAttention) parent = store->Parent(g, at);
      store->Drop(g, at);
      ++result.dropped;
      // A dropped full-attention leaf may leave its parent a useless leaf.
      if (parent) {
        queued.erase(*parent);
        enqueue(*parent);
      }
    }
    if (pinned_kept) result.pinned.push_back(at);
  }
  return result;
}

}  // namespace kvtier
