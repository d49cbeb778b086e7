#include "storage/prefix_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

NamespaceId Ns(const std::string& model) {
  NamespaceSpec s;
  s.model_id = model;
  s.layout = KvLayout{1, 1, 64, DType::kBf16, 16, 0, 1};
  return NamespaceId::Of(s);
}

BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

// A record to insert, and the parent to insert it under.
struct Staged {
  std::unique_ptr<BlockRecord> rec;
  BlockKey parent;
};

Staged Rec(const NamespaceId& ns, const std::string& key, const std::string& parent,
           uint32_t cls = 0) {
  auto r = std::make_unique<BlockRecord>();
  r->ns = ns;
  r->key = Key(key);
  r->size = 100;
  r->slot.size_class = cls;
  return {std::move(r), parent.empty() ? BlockKey() : Key(parent)};
}

absl::Status Insert(PrefixIndex& index, Staged staged) {
  return index.Insert(std::move(staged.rec), staged.parent);
}

TEST(PrefixIndexTest, InsertRequiresParentInSameNamespace) {
  PrefixIndex index;
  const NamespaceId a = Ns("a"), b = Ns("b");
  EXPECT_EQ(Insert(index, Rec(a, "k1", "k0")).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Insert(index, Rec(a, "k0", "")).ok());
  EXPECT_EQ(Insert(index, Rec(b, "k1", "k0")).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Insert(index, Rec(a, "k1", "k0")).ok());
  BlockRecord* k1 = index.Find(a, Key("k1"));
  ASSERT_NE(k1, nullptr);
  k1->size = 77;
  EXPECT_EQ(Insert(index, Rec(a, "k1", "k0")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.Find(b, Key("k0")), nullptr);
  // The refused duplicate replaced nothing: the first record is still the
  // one indexed, and still its parent's only child.
  EXPECT_EQ(index.Find(a, Key("k1")), k1);
  EXPECT_EQ(k1->size, 77u);
  EXPECT_EQ(index.Find(a, Key("k0"))->children().size(), 1u);
}

std::vector<BlockKey> Keys(std::initializer_list<const char*> keys) {
  std::vector<BlockKey> out;
  for (const char* k : keys) out.push_back(Key(k));
  return out;
}

std::vector<std::string> Names(const std::vector<BlockRecord*>& recs) {
  std::vector<std::string> out;
  for (const BlockRecord* r : recs) out.emplace_back(r->key.bytes());
  return out;
}

// Chains a -> b -> c -> d and a -> x in one namespace, e -> f in another; the
// walk stops at the first key not cached and at the first whose cached
// parent is not the key before it, and appends to what `out` held.
TEST(PrefixIndexTest, ReservedRoomThatNoBlockUsedIsReleased) {
  PrefixIndex index;
  const NamespaceId unused = Ns("unused"), used = Ns("used");
  index.Reserve(unused, 10'000);
  index.Reserve(used, 10'000);
  EXPECT_GE(index.CapacityIn(unused), 10'000u);
  EXPECT_EQ(index.CountIn(unused), 0u);
  EXPECT_TRUE(index.Roots(unused).empty());
  ASSERT_TRUE(Insert(index, Rec(used, "a", "")).ok());
  ASSERT_TRUE(Insert(index, Rec(used, "b", "a")).ok());
  ASSERT_TRUE(Insert(index, Rec(used, "c", "b")).ok());
  EXPECT_GE(index.CapacityIn(used), 10'000u);

  index.ReleaseUnusedRoom();
  EXPECT_EQ(index.CapacityIn(unused), 0u);
  EXPECT_LT(index.CapacityIn(used), 100u);
  EXPECT_EQ(index.CountIn(used), 3u);
  EXPECT_EQ(index.size(), 3u);
  std::vector<BlockRecord*> found;
  EXPECT_EQ(index.MatchChain(used, {Key("a"), Key("b"), Key("c")}, &found), 3u);
  EXPECT_EQ(found[2]->parent, found[1]);
  // A table just big enough is left alone.
  index.Reserve(used, 4);
  const size_t room = index.CapacityIn(used);
  index.ReleaseUnusedRoom();
  EXPECT_EQ(index.CapacityIn(used), room);
}

// The keys of each candidate set, coldest first.
std::vector<std::vector<std::string>> CandidateKeys(const PrefixIndex& index) {
  std::vector<std::vector<std::string>> out(PrefixIndex::kNumCandidates);
  for (int k = 0; k < PrefixIndex::kNumCandidates; ++k) {
    index.ForEachCandidate(static_cast<PrefixIndex::Candidate>(k), [&](const BlockRecord* r) {
      out[k].push_back(std::string(r->key.bytes()));
    });
  }
  return out;
}

TEST(PrefixIndexTest, ABulkLoadFilesTheSameCandidatesAsInsertsOneByOne) {
  const NamespaceId ns = Ns("bulk");
  // A forest in parent-first order: each block's parent is an earlier one
  // (or none), residency mixed over the three candidate kinds.
  std::mt19937 rng(7);
  struct Spec {
    std::string key, parent;
    bool in_host, on_nvme;
  };
  std::vector<Spec> specs;
  for (int i = 0; i < 300; ++i) {
    const bool root = i == 0 || rng() % 8 == 0;
    const int mode = static_cast<int>(rng() % 3);
    specs.push_back(
        {absl::StrCat("k", i), root ? "" : absl::StrCat("k", rng() % i), mode != 2, mode != 0});
  }
  auto insert = [&](PrefixIndex& index, const Spec& s) {
    auto r = Rec(ns, s.key, s.parent, /*cls=*/static_cast<uint32_t>(s.key.size() % 2));
    r.rec->in_host = s.in_host;
    r.rec->on_nvme = s.on_nvme;
    ASSERT_TRUE(Insert(index, std::move(r)).ok());
  };
  PrefixIndex one_by_one, bulk;
  for (const Spec& s : specs) insert(one_by_one, s);
  // The first 40 are filed before the bulk load: some of them gain
  // children during it and must leave the leaf sets.
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i == 40) bulk.BeginBulkLoad();
    insert(bulk, specs[i]);
    if (i == 100) {  // a block pinned and released mid-load is filed then
      BlockRecord* r = bulk.Find(ns, Key(specs[60].key));
      bulk.AddRef(r);
      bulk.DropRef(r);
    }
  }
  const size_t filed_mid_load = bulk.evictable_count();
  bulk.EndBulkLoad();
  EXPECT_LT(filed_mid_load, one_by_one.evictable_count());
  EXPECT_EQ(CandidateKeys(bulk), CandidateKeys(one_by_one));
  EXPECT_GT(one_by_one.evictable_count(), 50u);
  for (uint32_t cls : {0u, 1u}) {
    for (auto kind : {PrefixIndex::kHostOnlyLeaf, PrefixIndex::kHostCopy}) {
      ASSERT_NE(one_by_one.Coldest(kind, cls), nullptr);
      EXPECT_EQ(bulk.Coldest(kind, cls)->key, one_by_one.Coldest(kind, cls)->key);
    }
  }
  // After the load, the index files as usual.
  insert(bulk, {"late", specs.back().key, true, false});
  insert(one_by_one, {"late", specs.back().key, true, false});
  EXPECT_EQ(CandidateKeys(bulk), CandidateKeys(one_by_one));
}

// Tags of 1 and 2 bits: nearly every key shares its table tag with another
// (storage/record_table.h); 64: the default.
class PrefixIndexTagBitsTest : public ::testing::TestWithParam<int> {};

TEST_P(PrefixIndexTagBitsTest, MatchChainKeepsTheLeadingRunOfParentLinkedKeys) {
  PrefixIndex index(nullptr, GetParam());
  const NamespaceId ns = Ns("m"), other = Ns("o");
  for (auto [k, p] : std::vector<std::pair<const char*, const char*>>{
           {"a", ""}, {"b", "a"}, {"c", "b"}, {"d", "c"}, {"x", "a"}}) {
    ASSERT_TRUE(Insert(index, Rec(ns, k, p)).ok());
  }
  ASSERT_TRUE(Insert(index, Rec(other, "e", "")).ok());
  ASSERT_TRUE(Insert(index, Rec(other, "f", "e")).ok());
  using V = std::vector<std::string>;
  auto match = [&](const NamespaceId& n, std::initializer_list<const char*> keys) {
    std::vector<BlockRecord*> out;
    const size_t got = index.MatchChain(n, Keys(keys), &out);
    EXPECT_EQ(got, out.size());
    return Names(out);
  };
  EXPECT_EQ(match(ns, {"a", "b", "c", "d"}), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(match(ns, {"b", "c"}), (V{"b", "c"}));            // need not start at a root
  EXPECT_EQ(match(ns, {"a", "b", "q", "d"}), (V{"a", "b"}));  // q not cached
  EXPECT_EQ(match(ns, {"a", "b", "x", "c"}), (V{"a", "b"}));  // x's parent is a
  EXPECT_EQ(match(ns, {"a", "c", "d"}), (V{"a"}));            // c's parent is b
  EXPECT_EQ(match(ns, {"q", "a"}), V{});                      // the first is missing
  EXPECT_EQ(match(ns, {"a", "b", "c", "d", "a", "b"}), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(match(ns, {"e", "f"}), V{});  // another namespace's blocks
  EXPECT_EQ(match(other, {"e", "f"}), (V{"e", "f"}));
  EXPECT_EQ(match(Ns("none"), {"a"}), V{});
  EXPECT_EQ(match(ns, {}), V{});
  // A longer chain than the walk's prefetch distance, cut late.
  std::string parent = "d";
  std::vector<BlockKey> keys = Keys({"a", "b", "c", "d"});
  for (int i = 0; i < 40; ++i) {
    const std::string k = absl::StrCat("k", i);
    ASSERT_TRUE(Insert(index, Rec(ns, k, parent)).ok());
    keys.push_back(Key(k));
    parent = k;
  }
  std::vector<BlockRecord*> out = {nullptr};
  EXPECT_EQ(index.MatchChain(ns, keys, &out), 44u);
  ASSERT_EQ(out.size(), 45u);
  EXPECT_EQ(out[0], nullptr);
  EXPECT_EQ(out.back()->key, Key("k39"));
  keys[30] = Key("x");
  out.clear();
  EXPECT_EQ(index.MatchChain(ns, keys, &out), 30u);
}

INSTANTIATE_TEST_SUITE_P(TagBits, PrefixIndexTagBitsTest, ::testing::Values(1, 2, 64));

TEST(PrefixIndexTest, OnlyUnpinnedLeavesAreEvictableColdestFirst) {
  PrefixIndex index;
  const NamespaceId ns = Ns("m");
  ASSERT_TRUE(Insert(index, Rec(ns, "a", "")).ok());
  ASSERT_TRUE(Insert(index, Rec(ns, "b", "a")).ok());
  ASSERT_TRUE(Insert(index, Rec(ns, "c", "")).ok());
  BlockRecord* a = index.Find(ns, Key("a"));
  BlockRecord* b = index.Find(ns, Key("b"));
  BlockRecord* c = index.Find(ns, Key("c"));
  EXPECT_EQ(index.evictable_count(), 2u);  // b and c; a has a child
  EXPECT_EQ(index.ColdestEvictable(std::nullopt), b);
  index.Touch(b);
  EXPECT_EQ(index.ColdestEvictable(std::nullopt), c);
  index.AddLease(c);
  EXPECT_EQ(index.ColdestEvictable(std::nullopt), b);
  index.AddRef(b);
  EXPECT_EQ(index.ColdestEvictable(std::nullopt), nullptr);
  index.DropRef(b);
  index.DropLease(c);
  EXPECT_EQ(index.evictable_count(), 2u);
  index.Remove(b);
  EXPECT_EQ(index.evictable_count(), 2u);  // a became a leaf
  EXPECT_EQ(index.ColdestEvictable(std::nullopt), a);
  EXPECT_EQ(index.CountStranded(), 0u);
}

TEST(PrefixIndexTest, SubtreePostOrderPutsChildrenFirst) {
  PrefixIndex index;
  const NamespaceId ns = Ns("m");
  ASSERT_TRUE(Insert(index, Rec(ns, "r", "")).ok());
  ASSERT_TRUE(Insert(index, Rec(ns, "x", "r")).ok());
  ASSERT_TRUE(Insert(index, Rec(ns, "y", "r")).ok());
  ASSERT_TRUE(Insert(index, Rec(ns, "z", "x")).ok());
  std::vector<BlockRecord*> order = index.SubtreePostOrder(index.Find(ns, Key("r")));
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order.back()->key, Key("r"));
  for (BlockRecord* rec : order) index.Remove(rec);  // aborts if order is wrong
  EXPECT_EQ(index.size(), 0u);
}

TEST(PrefixIndexTest, RootsArePerNamespaceAndFollowRemoval) {
  PrefixIndex index;
  const NamespaceId a = Ns("a"), b = Ns("b");
  ASSERT_TRUE(Insert(index, Rec(a, "r1", "")).ok());
  ASSERT_TRUE(Insert(index, Rec(a, "r2", "")).ok());
  ASSERT_TRUE(Insert(index, Rec(a, "c", "r1")).ok());
  ASSERT_TRUE(Insert(index, Rec(b, "r1", "")).ok());
  std::vector<BlockRecord*> roots = index.Roots(a);
  ASSERT_EQ(roots.size(), 2u);
  for (BlockRecord* r : roots) EXPECT_TRUE(r->parent_key().empty());
  EXPECT_EQ(index.Roots(b).size(), 1u);
  index.Remove(index.Find(a, Key("r2")));
  ASSERT_EQ(index.Roots(a).size(), 1u);
  EXPECT_EQ(index.Roots(a)[0]->key, Key("r1"));
  index.Remove(index.Find(a, Key("c")));  // not a root: roots unchanged
  EXPECT_EQ(index.Roots(a).size(), 1u);
  index.Remove(index.Find(a, Key("r1")));
  EXPECT_TRUE(index.Roots(a).empty());
  EXPECT_EQ(index.Roots(b).size(), 1u);
}

TEST(PrefixIndexDeathTest, RemovingABlockWithChildrenAborts) {
  PrefixIndex index;
  const NamespaceId ns = Ns("m");
  ASSERT_TRUE(Insert(index, Rec(ns, "a", "")).ok());
  ASSERT_TRUE(Insert(index, Rec(ns, "b", "a")).ok());
  EXPECT_DEATH(index.Remove(index.Find(ns, Key("a"))), "children");
}

TEST(PrefixIndexDeathTest, RemovingDuringABulkLoadAborts) {
  PrefixIndex index;
  const NamespaceId ns = Ns("m");
  index.BeginBulkLoad();
  ASSERT_TRUE(Insert(index, Rec(ns, "a", "")).ok());
  EXPECT_DEATH(index.Remove(index.Find(ns, Key("a"))), "bulk load");
}

// Randomized: inserts (roots and children of random cached blocks), pins,
// unpins, touches, residency moves between host and NVMe, freed host copies
// and removals of the coldest candidates. After every operation no block is
// stranded, every block keeps a copy somewhere, and the candidate sets hold
// exactly the blocks they should, in the policy's order: by last access for
// LRU; for the value policy by the priority a model of it computes at each
// block's last use (inflation then plus 1 x reuse x retention), then by last
// access. A block filed long after its last use (a parent whose last child
// went) keeps the inflation of that use.
// Also with 10-bit table tags, under which keys share tags (the test grows
// to thousands of blocks: a few records a tag, so slots change hands often).
class PrefixIndexRandomizedTest : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(PrefixIndexRandomizedTest, NeverStrandsAndKeepsThePolicyOrder) {
  const auto [policy_name, tag_bits] = GetParam();
  std::unique_ptr<EvictionPolicy> policy = *EvictionPolicyByName(policy_name);
  const bool value = std::string(policy_name) == "value";
  PrefixIndex index(policy.get(), tag_bits);
  const NamespaceId ns = Ns("m");
  // The model: each block's expected priority.
  double inflation = 0;
  absl::flat_hash_map<const BlockRecord*, double> model;
  auto price = [&](const BlockRecord& r) {
    const double factor = r.retention == 0 ? 0 : std::exp2((r.retention - 35) / 13.0);
    return inflation + (r.uses >= 2 ? 4.0 : 1.0) * factor;
  };
  const uint8_t retentions[] = {0, 20, 35, 35, 35, 90};
  // The candidate kinds a block is in, and the lowest model priority among
  // the blocks of those kinds: what the clock may rise to when it is
  // reclaimed (it may not be the lowest itself: the coldest of one class).
  auto kinds = [](const BlockRecord& r) {
    uint8_t k = 0;
    if (r.pinned()) return k;
    const bool leaf = r.children().empty();
    if (r.in_host && !r.on_nvme && leaf) k |= 1 << PrefixIndex::kHostOnlyLeaf;
    if (r.in_host && r.on_nvme) k |= 1 << PrefixIndex::kHostCopy;
    if (!r.in_host && r.on_nvme && leaf) k |= 1 << PrefixIndex::kNvmeOnlyLeaf;
    return k;
  };
  auto floor_of = [&](const BlockRecord& victim) {
    double floor = model[&victim];
    const uint8_t of = kinds(victim);
    index.ForEach([&](const BlockRecord& r) {
      if ((kinds(r) & of) != 0) floor = std::min(floor, model[&r]);
    });
    return floor;
  };
  std::mt19937_64 rng(12345);
  std::vector<std::string> live;
  std::vector<BlockRecord*> pinned;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4 || live.empty()) {
      std::string parent = (live.empty() || rng() % 4 == 0) ? "" : live[rng() % live.size()];
      std::string key = absl::StrCat("k", next++);
      auto rec = Rec(ns, key, parent, static_cast<uint32_t>(rng() % 3));
      rec.rec->uses = 1 + static_cast<uint32_t>(rng() % 2);
      rec.rec->retention = retentions[rng() % 6];
      BlockRecord* r = rec.rec.get();
      ASSERT_TRUE(Insert(index, std::move(rec)).ok());
      model[r] = price(*r);
      live.push_back(key);
    } else if (op < 6) {
      BlockRecord* rec = index.Find(ns, Key(live[rng() % live.size()]));
      index.AddRef(rec);
      pinned.push_back(rec);
    } else if (op < 7 && !pinned.empty()) {
      size_t i = rng() % pinned.size();
      index.DropRef(pinned[i]);
      pinned.erase(pinned.begin() + static_cast<long>(i));
    } else if (op < 8) {
      BlockRecord* rec = index.Find(ns, Key(live[rng() % live.size()]));
      if (rng() % 2) {
        index.Touch(rec);
        model[rec] = price(*rec);
      } else if (!rec->pinned()) {
        // Residency moves: a copy to NVMe (demotion), or back to host
        // (promotion); each keeps at least one copy.
        if (!rec->on_nvme) {
          rec->on_nvme = true;
        } else if (!rec->in_host) {
          rec->in_host = true;
        }
        index.Reclassify(rec);
      }
    } else if (op < 9) {
      // Host pressure: free a host copy of a block that is also on NVMe.
      BlockRecord* victim = index.Coldest(PrefixIndex::kHostCopy, std::nullopt);
      if (victim == nullptr) continue;
      ASSERT_TRUE(victim->on_nvme && victim->in_host && !victim->pinned());
      inflation = std::max(inflation, floor_of(*victim));
      index.NoteReclaimed(victim, /*dropped=*/false);
      victim->in_host = false;
      index.Reclassify(victim);
    } else if (rng() % 3 == 0) {
      // A leaf removed straight away, not found through the candidate sets:
      // it may have been touched since it was filed (a queued refile).
      BlockRecord* rec = index.Find(ns, Key(live[rng() % live.size()]));
      if (!rec->children().empty() || rec->pinned()) continue;
      std::string key(rec->key.bytes());
      model.erase(rec);
      index.Remove(rec);
      live.erase(std::find(live.begin(), live.end(), key));
    } else {
      std::optional<uint32_t> cls;
      if (rng() % 2) cls = static_cast<uint32_t>(rng() % 3);
      BlockRecord* victim = index.ColdestEvictable(cls);
      if (victim == nullptr) victim = index.Coldest(PrefixIndex::kNvmeOnlyLeaf, std::nullopt);
      if (victim == nullptr) continue;
      ASSERT_TRUE(victim->children().empty());
      ASSERT_FALSE(victim->pinned());
      if (cls && victim->in_host) {
        ASSERT_EQ(victim->slot.size_class, *cls);
      }
      std::string key(victim->key.bytes());
      inflation = std::max(inflation, floor_of(*victim));
      index.NoteReclaimed(victim, /*dropped=*/true);
      model.erase(victim);
      index.Remove(victim);
      live.erase(std::find(live.begin(), live.end(), key));
    }
    ASSERT_EQ(index.CountStranded(), 0u) << "step " << step;
    size_t candidates = 0;
    index.ForEach([&](const BlockRecord& r) {
      ASSERT_TRUE(r.in_host || r.on_nvme) << "a block with no copy";
      if (r.pinned()) return;
      const bool leaf = r.children().empty();
      candidates += (r.in_host && !r.on_nvme && leaf) + (r.in_host && r.on_nvme) +
                    (!r.in_host && r.on_nvme && leaf);
    });
    ASSERT_EQ(index.evictable_count(), candidates) << "step " << step;
    if (step % 7 == 0) {
      // Exact recency order, whatever refiles Touch left queued: each set
      // lists its blocks by last access, oldest first, and the coldest of a
      // host class is the oldest of that class.
      std::vector<const BlockRecord*> want[PrefixIndex::kNumCandidates];
      index.ForEach([&](const BlockRecord& r) {
        if (r.pinned()) return;
        const bool leaf = r.children().empty();
        if (r.in_host && !r.on_nvme && leaf) want[PrefixIndex::kHostOnlyLeaf].push_back(&r);
        if (r.in_host && r.on_nvme) want[PrefixIndex::kHostCopy].push_back(&r);
        if (!r.in_host && r.on_nvme && leaf) want[PrefixIndex::kNvmeOnlyLeaf].push_back(&r);
      });
      for (int k = 0; k < PrefixIndex::kNumCandidates; ++k) {
        const auto kind = static_cast<PrefixIndex::Candidate>(k);
        std::sort(want[k].begin(), want[k].end(), [&](const BlockRecord* a, const BlockRecord* b) {
          if (value && model[a] != model[b]) return model[a] < model[b];
          return a->last_access < b->last_access;
        });
        if (kind != PrefixIndex::kNvmeOnlyLeaf) {
          for (uint32_t cls = 0; cls < 3; ++cls) {
            const BlockRecord* oldest = nullptr;
            for (const BlockRecord* r : want[k]) {
              if (r->slot.size_class == cls) {
                oldest = r;
                break;
              }
            }
            ASSERT_EQ(index.Coldest(kind, cls), oldest) << "kind " << k << " step " << step;
          }
        }
        std::vector<const BlockRecord*> got;
        index.ForEachCandidate(kind, [&](BlockRecord* r) { got.push_back(r); });
        ASSERT_EQ(got, want[k]) << "kind " << k << " step " << step;
      }
    }
    if (step % 50 == 0) {
      // The intrusive child lists hold exactly the blocks whose parent is
      // the block, each once.
      absl::flat_hash_map<const BlockRecord*, absl::flat_hash_set<const BlockRecord*>> want, got;
      index.ForEach([&](const BlockRecord& r) {
        if (r.parent != nullptr) want[r.parent].insert(&r);
        for (const BlockRecord* c : r.children()) {
          ASSERT_TRUE(got[&r].insert(c).second) << "a child listed twice, step " << step;
          ASSERT_EQ(c->parent, &r) << "step " << step;
        }
      });
      ASSERT_EQ(got, want) << "step " << step;
    }
  }
  EXPECT_GT(index.size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, PrefixIndexRandomizedTest,
                         ::testing::Combine(::testing::Values("lru", "value"),
                                            ::testing::Values(10, 64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_tag_bits_" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace kvtier
