// LeafBelady: the offline optimum of a prefix cache, for bench/trace_replay.
//
// Replays requests (chains of block ids) against a cache of `capacity`
// blocks that knows the future: when full, it evicts the cached leaf whose
// next use is farthest (deeper first on ties), which may be a block the
// current request just inserted: the rest of that chain is then not cached
// (the optimum may refuse admission). Restricted to leaves, so it never
// strands a block; a parent's next use is never later than its children's,
// so the restriction costs the unrestricted Belady nothing.
//
// With weights (a value per block hit), it evicts the leaf with the lowest
// value per request until its next use (as of its last use) instead: a
// greedy reference for weighted caching, which has no simple exact optimum;
// the bench labels it so.
//
// Thread-safety: not thread-safe.
#ifndef KVTIER_BENCH_LEAF_BELADY_H_
#define KVTIER_BENCH_LEAF_BELADY_H_

#include <cstdint>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace kvtier {

class LeafBelady {
 public:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  LeafBelady(uint64_t capacity, bool weighted) : capacity_(capacity), weighted_(weighted) {}

  // Request `r` (requests in order, r = 0, 1, ...) with block ids `ids`;
  // `next_use[i]` is the index of the next request that uses ids[i]
  // (kNever if none) and `value` what a hit on one of its blocks is worth.
  // Returns the length of its cached prefix, then caches what it can of the
  // rest.
  size_t Request(uint64_t r, const std::vector<uint64_t>& ids,
                 const std::vector<uint64_t>& next_use, double value) {
    size_t k = 0;
    while (k < ids.size() && cached_.contains(ids[k])) ++k;
    for (size_t i = 0; i < k; ++i) Refile(ids[i], next_use[i], value, r);
    for (size_t i = k; i < ids.size(); ++i) {
      if (i > 0 && !cached_.contains(ids[i - 1])) break;  // its parent was just evicted
      while (cached_.size() >= capacity_) EvictOne();
      if (i > 0 && !cached_.contains(ids[i - 1])) break;
      Node n;
      n.parent = i == 0 ? kNever : ids[i - 1];
      n.depth = static_cast<uint32_t>(i);
      cached_.emplace(ids[i], n);
      if (i > 0) {
        Node& p = cached_[ids[i - 1]];
        if (p.children++ == 0) leaves_.erase(p.filed);
      }
      Refile(ids[i], next_use[i], value, r);
    }
    return k;
  }

 private:
  struct Node {
    uint64_t parent = kNever;
    uint32_t depth = 0;
    uint32_t children = 0;
    uint64_t next_use = kNever;
    double value = 1;
    std::tuple<double, int64_t, uint64_t> filed{};  // its key in leaves_, while a leaf
  };

  // Lowest key is evicted first.
  std::tuple<double, int64_t, uint64_t> KeyOf(uint64_t id, const Node& n, uint64_t now) const {
    double score;
    if (n.next_use == kNever) {
      score = -std::numeric_limits<double>::infinity();
    } else if (weighted_) {
      score = n.value / static_cast<double>(n.next_use - now);  // as of its last use
    } else {
      score = -static_cast<double>(n.next_use);  // farthest first
    }
    return {score, -static_cast<int64_t>(n.depth), id};
  }

  void Refile(uint64_t id, uint64_t next_use, double value, uint64_t now) {
    Node& n = cached_[id];
    if (n.children == 0) leaves_.erase(n.filed);
    n.next_use = next_use;
    n.value = value;
    n.filed = KeyOf(id, n, now);
    if (n.children == 0) leaves_.insert(n.filed);
  }

  void EvictOne() {
    auto it = leaves_.begin();
    const uint64_t id = std::get<2>(*it);
    leaves_.erase(it);
    const uint64_t parent = cached_[id].parent;
    cached_.erase(id);
    if (parent != kNever) {
      Node& p = cached_[parent];
      if (--p.children == 0) leaves_.insert(p.filed);
    }
  }

  const uint64_t capacity_;
  const bool weighted_;
  absl::flat_hash_map<uint64_t, Node> cached_;
  std::set<std::tuple<double, int64_t, uint64_t>> leaves_;
};

}  // namespace kvtier

#endif  // KVTIER_BENCH_LEAF_BELADY_H_
