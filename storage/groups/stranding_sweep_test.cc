#include "storage/groups/stranding_sweep.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

// Positions are the nodes of a fixed tree (node i's parent is parent[i],
// -1 for a root); each group holds a set of nodes.
class TreeStore final : public GroupStore {
 public:
  TreeStore(std::vector<GroupRule> rules, std::vector<int> parent)
      : rules_(std::move(rules)), parent_(std::move(parent)), held_(rules_.size()) {
    for (size_t g = 0; g < rules_.size(); ++g) {
      if (rules_[g].kind == GroupKind::kFullAttention) {
        spine_ = static_cast<int>(g);
        break;
      }
    }
    for (size_t g = 0; g < rules_.size(); ++g) held_[g].assign(parent_.size(), false);
  }

  static BlockKey Key(int node) { return *BlockKey::Create(absl::StrCat("n", node)); }
  static int Node(const BlockKey& key) { return std::stoi(std::string(key.bytes().substr(1))); }

  bool Holds(size_t g, const BlockKey& key) override { return held_[g][Node(key)]; }
  std::optional<BlockKey> SpineParent(const BlockKey& key) override {
    const int n = Node(key);
    if (spine_ < 0 || !held_[spine_][n] || parent_[n] < 0) return std::nullopt;
    return Key(parent_[n]);
  }
  void SpineChildren(const BlockKey& key, std::vector<BlockKey>* out) override {
    const int n = Node(key);
    for (size_t c = 0; c < parent_.size(); ++c) {
      if (parent_[c] == n && held_[spine_][c]) out->push_back(Key(static_cast<int>(c)));
    }
  }
  bool HasChildren(size_t g, const BlockKey& key) override { return HasChild(g, Node(key)); }
  std::optional<BlockKey> Parent(size_t, const BlockKey& key) override {
    const int n = Node(key);
    if (parent_[n] < 0) return std::nullopt;
    return Key(parent_[n]);
  }
  bool Pinned(size_t g, const BlockKey& key) override { return pinned_.contains({g, Node(key)}); }
  void Drop(size_t g, const BlockKey& key) override {
    const int n = Node(key);
    ASSERT_TRUE(held_[g][n]);
    ASSERT_FALSE(Pinned(g, key));
    if (rules_[g].kind == GroupKind::kFullAttention) {
      ASSERT_FALSE(HasChild(g, n));
    }
    held_[g][n] = false;
  }

  bool HasChild(size_t g, int n) const {
    for (size_t c = 0; c < parent_.size(); ++c) {
      if (parent_[c] == n && held_[g][c]) return true;
    }
    return false;
  }
  std::vector<int> Path(int n) const {  // root first
    std::vector<int> path;
    for (int at = n; at >= 0; at = parent_[at]) path.insert(path.begin(), at);
    return path;
  }

  // The oracle: cuts by the rules read literally over tree paths.
  bool OracleRestorable(int d) const {
    const std::vector<int> path = Path(d);
    for (size_t g = 0; g < rules_.size(); ++g) {
      for (size_t i = 0; i < path.size(); ++i) {
        const bool needed = rules_[g].kind == GroupKind::kFullAttention ||
                            (rules_[g].kind == GroupKind::kSlidingWindow &&
                             path.size() - i <= rules_[g].window_blocks) ||
                            (rules_[g].kind == GroupKind::kRecurrent && i + 1 == path.size());
        if (needed && !held_[g][path[i]]) return false;
      }
    }
    return true;
  }
  std::vector<bool> OracleCuts() const {
    std::vector<bool> cuts(parent_.size());
    for (size_t d = 0; d < parent_.size(); ++d) cuts[d] = OracleRestorable(static_cast<int>(d));
    return cuts;
  }
  // Bytes no restorable cut uses, as "group:node".
  std::vector<std::string> OracleStranded() const {
    const std::vector<bool> cuts = OracleCuts();
    std::vector<std::vector<bool>> used(rules_.size(), std::vector<bool>(parent_.size()));
    for (size_t d = 0; d < parent_.size(); ++d) {
      if (!cuts[d]) continue;
      const std::vector<int> path = Path(static_cast<int>(d));
      for (size_t g = 0; g < rules_.size(); ++g) {
        const KeyRange r = LoadRange(rules_[g], path.size());
        for (size_t i = r.begin; i < r.end; ++i) used[g][path[i]] = true;
      }
    }
    std::vector<std::string> stranded;
    for (size_t g = 0; g < rules_.size(); ++g) {
      for (size_t n = 0; n < parent_.size(); ++n) {
        if (held_[g][n] && !used[g][n]) stranded.push_back(absl::StrCat(g, ":", n));
      }
    }
    return stranded;
  }

  std::vector<GroupRule> rules_;
  std::vector<int> parent_;
  std::vector<std::vector<bool>> held_;
  int spine_ = -1;
  absl::flat_hash_set<std::pair<size_t, int>> pinned_;
};

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) absl::StrAppend(&out, s, " ");
  return out;
}

// A gpt-oss-shaped namespace (full attention + a 2-block window) over one
// chain 0-1-2-3-4-5.
TEST(StrandingSweepTest, SlidingWindowBlocksBehindEveryCutAreDropped) {
  TreeStore s({{GroupKind::kFullAttention, 0}, {GroupKind::kSlidingWindow, 2}},
              {-1, 0, 1, 2, 3, 4});
  StrandingSweep sweep(s.rules_);
  std::vector<BlockKey> keys;
  for (int n = 0; n < 6; ++n) {
    s.held_[0][n] = s.held_[1][n] = true;
    keys.push_back(TreeStore::Key(n));
  }
  // Every cut is restorable: nothing goes.
  EXPECT_EQ(sweep.AfterAdd(&s, keys).dropped, 0u);
  // The window block at 3 goes: cuts 4 and 5 (nodes 3, 4) are lost; the
  // window block at 2 served only them and cut 3 (node 2), which stays.
  s.held_[1][3] = false;
  SweepResult r = sweep.AfterRemove(&s, {TreeStore::Key(3)});
  EXPECT_EQ(Join(s.OracleStranded()), "");
  // Node 5 (cut 6) still has its window (4, 5); node 4's cut is lost.
  EXPECT_TRUE(s.OracleRestorable(5));
  EXPECT_FALSE(s.OracleRestorable(4));
  EXPECT_EQ(r.dropped, 0u);  // everything left is still used
}

TEST(StrandingSweepTest, AttentionPastTheLastSnapshotGoesAndPinnedBytesWait) {
  // Full attention + recurrent; chain of 6, snapshot after node 2 only.
  TreeStore s({{GroupKind::kFullAttention, 0}, {GroupKind::kRecurrent, 0}}, {-1, 0, 1, 2, 3, 4});
  StrandingSweep sweep(s.rules_);
  std::vector<BlockKey> keys;
  for (int n = 0; n < 6; ++n) {
    s.held_[0][n] = true;
    keys.push_back(TreeStore::Key(n));
  }
  s.held_[1][2] = true;
  s.pinned_.insert({0, 4});  // an in-flight read of node 4's block
  SweepResult r = sweep.AfterAdd(&s, keys);
  // Node 5 goes; node 4 is pinned, so it and node 3 (its parent) stay.
  EXPECT_EQ(r.dropped, 1u);
  EXPECT_FALSE(s.held_[0][5]);
  EXPECT_TRUE(s.held_[0][3] && s.held_[0][4]);
  ASSERT_EQ(r.pinned.size(), 1u);
  EXPECT_EQ(TreeStore::Node(r.pinned[0]), 4);
  // Unpinned, a second sweep of the key it reported finishes the job.
  s.pinned_.clear();
  r = sweep.AfterRemove(&s, r.pinned);
  EXPECT_EQ(r.dropped, 2u);
  EXPECT_EQ(Join(s.OracleStranded()), "");
  EXPECT_TRUE(s.held_[0][2] && s.held_[1][2]);
}

// Random saves (a path of new blocks with some window blocks and
// snapshots) and random evictions on a random tree; after every sweep no
// byte is stranded and every cut that was restorable before it still is.
TEST(StrandingSweepTest, RandomSavesAndEvictionsNeverStrandNorLoseACut) {
  std::mt19937 rng(9);
  for (int round = 0; round < 300; ++round) {
    const int nodes = 8 + static_cast<int>(rng() % 25);
    std::vector<int> parent(nodes);
    for (int i = 0; i < nodes; ++i) {
      parent[i] = (i == 0 || rng() % 6 == 0) ? -1 : static_cast<int>(rng() % i);
      if (i > 0 && rng() % 2 == 0) parent[i] = i - 1;  // mostly chains
    }
    std::vector<GroupRule> rules;
    const bool attention = rng() % 5 != 0;
    if (attention) rules.push_back({GroupKind::kFullAttention, 0});
    const int extra = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < extra; ++e) {
      const int kind = static_cast<int>(rng() % 3);
      if (attention && kind == 0) rules.push_back({GroupKind::kFullAttention, 0});
      if (attention && kind == 1) {
        rules.push_back({GroupKind::kSlidingWindow, 1 + static_cast<uint32_t>(rng() % 4)});
      }
      if (kind == 2 || !attention) rules.push_back({GroupKind::kRecurrent, 0});
    }
    TreeStore s(rules, parent);
    StrandingSweep sweep(rules);
    for (int op = 0; op < 60; ++op) {
      std::vector<BlockKey> touched;
      const bool save = rng() % 3 != 0;
      if (save) {
        // A path from a root down to a random node, as one Save.
        const std::vector<int> path = s.Path(static_cast<int>(rng() % nodes));
        for (size_t i = 0; i < path.size(); ++i) {
          const bool tail = path.size() - i <= 3;
          for (size_t g = 0; g < rules.size(); ++g) {
            const bool put = rules[g].kind == GroupKind::kFullAttention ||
                             (rules[g].kind == GroupKind::kSlidingWindow && (tail || rng() % 2)) ||
                             (rules[g].kind == GroupKind::kRecurrent &&
                              (i + 1 == path.size() || rng() % 3 == 0));
            if (put) s.held_[g][path[i]] = true;
          }
          touched.push_back(TreeStore::Key(path[i]));
        }
      } else {
        // Evict one held, droppable group block.
        std::vector<std::pair<size_t, int>> candidates;
        for (size_t g = 0; g < rules.size(); ++g) {
          for (int n = 0; n < nodes; ++n) {
            if (!s.held_[g][n]) continue;
            if (rules[g].kind == GroupKind::kFullAttention && s.HasChild(g, n)) continue;
            candidates.push_back({g, n});
          }
        }
        if (candidates.empty()) continue;
        auto [g, n] = candidates[rng() % candidates.size()];
        if (parent[n] >= 0 && attention) touched.push_back(TreeStore::Key(parent[n]));
        s.held_[g][n] = false;
        touched.push_back(TreeStore::Key(n));
      }
      const std::vector<bool> before = s.OracleCuts();
      if (save) {
        sweep.AfterAdd(&s, touched);
      } else {
        sweep.AfterRemove(&s, touched);
      }
      std::string dump;
      for (size_t g = 0; g < rules.size(); ++g) {
        absl::StrAppend(&dump, "\ngroup ", g, " kind ", static_cast<int>(rules[g].kind), " w ",
                        rules[g].window_blocks, ":");
        for (int n = 0; n < nodes; ++n) {
          if (s.held_[g][n]) absl::StrAppend(&dump, " ", n);
        }
      }
      absl::StrAppend(&dump, "\nparents:");
      for (int n = 0; n < nodes; ++n) absl::StrAppend(&dump, " ", parent[n]);
      absl::StrAppend(&dump, save ? "\nsave" : "\nevict", " touched:");
      for (const BlockKey& k : touched) absl::StrAppend(&dump, " ", TreeStore::Node(k));
      ASSERT_EQ(Join(s.OracleStranded()), "") << "round " << round << " op " << op << dump;
      ASSERT_EQ(s.OracleCuts(), before) << "round " << round << " op " << op;
    }
  }
}

}  // namespace
}  // namespace kvtier
