// BlockCache with a hybrid namespace (full attention + sliding window +
// recurrent): a model-based run of random saves, lookups, loads, evictions,
// NVMe writes and restarts, checked against an in-test oracle of which cuts
// are restorable (invariant 9), plus the edges of the group API.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/block_cache.h"
#include "testing/host_tier_fixture.h"
#include "testing/test_bytes.h"

namespace kvtier {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint32_t kFull = 0, kWindow = 1, kState = 2;
constexpr uint32_t kWindowBlocks = 2;  // 32 tokens of 16-token blocks
constexpr uint64_t kAttentionBytes = 8 * kKiB;
constexpr uint64_t kStateBytes = 4 * kKiB;

// 6 layers: 0-1 full attention, 2-3 a 32-token window, 4-5 recurrent.
NamespaceSpec HybridSpec() {
  NamespaceSpec s;
  s.model_id = "hybrid-test";
  s.layout = KvLayout{6, 1, 64, DType::kBf16, 16, 0, 1};
  s.groups = {{GroupKind::kFullAttention, {0, 1}, 0, 0, 0},
              {GroupKind::kSlidingWindow, {2, 3}, 32, 0, 0},
              {GroupKind::kRecurrent, {4, 5}, 0, kStateBytes, 32}};
  return s;
}

uint64_t SizeOf(uint32_t group) { return group == kState ? kStateBytes : kAttentionBytes; }

std::vector<uint8_t> Content(uint32_t group, const std::string& key) {
  return DeterministicBytes(absl::StrCat(group, "/", key), SizeOf(group));
}

const std::vector<GroupRule>& Rules() {
  static const std::vector<GroupRule> rules = {{GroupKind::kFullAttention, 0},
                                               {GroupKind::kSlidingWindow, kWindowBlocks},
                                               {GroupKind::kRecurrent, 0}};
  return rules;
}

class HybridCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvtier-groups-XXXXXX";
    root_ = mkdtemp(tmpl);
    Open();
  }
  void TearDown() override {
    cache_.reset();
    std::filesystem::remove_all(root_);
  }

  void Open() {
    cache_.reset();
    BlockCacheOptions o;
    o.host_bytes = 1 * kMiB;
    o.slab_bytes = 256 * kKiB;
    o.max_block_bytes = 64 * kKiB;
    NvmeTierOptions nvme;
    nvme.store.dirs = {root_ + "/d0"};
    nvme.store.bytes_per_dir = 2 * kMiB;
    nvme.store.slab_bytes = 256 * kKiB;
    nvme.start_mover = false;
    nvme.admit_min_uses = 1;
    nvme.write_policy = "write_through";
    o.nvme = nvme;
    auto c = BlockCache::Create(o, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    cache_ = std::move(*c);
    auto opened = cache_->OpenNamespace(HybridSpec());
    ASSERT_TRUE(opened.ok()) << opened.status();
    ns_ = opened->id;
    ASSERT_EQ(opened->group_block_bytes,
              (std::vector<uint64_t>{kAttentionBytes, kAttentionBytes, kStateBytes}));
  }

  // One engine save: full-attention blocks [0, depth), window blocks from
  // `window_from`, snapshots at every checkpoint (each second block) and,
  // with `final_state`, after the last block.
  absl::StatusOr<PutResult> Save(const std::vector<std::string>& chain, size_t depth,
                                 size_t window_from, bool final_state) {
    ASSIGN_OR_RETURN(auto batch, cache_->BeginPut(ns_));
    for (size_t i = 0; i < depth; ++i) {
      const BlockKey parent = i == 0 ? BlockKey() : Key(chain[i - 1]);
      std::vector<uint32_t> groups = {kFull};
      if (i >= window_from) groups.push_back(kWindow);
      if ((i + 1) % 2 == 0 || (final_state && i + 1 == depth)) groups.push_back(kState);
      for (uint32_t g : groups) {
        RETURN_IF_ERROR(batch->StartBlock(Key(chain[i]), parent, SizeOf(g), g));
        RETURN_IF_ERROR(batch->Append(Content(g, chain[i])));
      }
    }
    return batch->Commit();
  }

  // The oracle: the longest cut whose groups all hold what the rules need,
  // read literally from what the cache holds.
  size_t OracleCut(const std::vector<BlockKey>& keys) {
    size_t best = 0;
    for (size_t k = 1; k <= keys.size(); ++k) {
      bool ok = true;
      for (uint32_t g = 0; g < 3 && ok; ++g) {
        const KeyRange r = LoadRange(Rules()[g], k);
        for (size_t i = r.begin; i < r.end && ok; ++i) {
          ok = cache_->HoldsForTesting(ns_, g, keys[i]);
        }
      }
      if (ok) best = k;
    }
    return best;
  }

  void ExpectNothingStranded(const std::string& where) {
    CacheSnapshot snap = cache_->Snapshot(/*scan_for_stranded=*/true);
    ASSERT_EQ(snap.stranded_blocks, 0u) << where;
    for (const NamespaceSnapshot& n : cache_->Namespaces(/*scan_for_stranded=*/true)) {
      ASSERT_EQ(n.groups.size(), 3u);
      for (size_t g = 0; g < 3; ++g)
        ASSERT_EQ(n.groups[g].stranded_bytes, 0u) << where << " g" << g;
    }
  }

  std::string root_;
  FakeClock clock_;
  std::unique_ptr<BlockCache> cache_;
  NamespaceId ns_;
};

// Picks the cut at `pick` in the list it is given (clamped to the last),
// and keeps the list.
class RecordingChooser final : public CutChooser {
 public:
  explicit RecordingChooser(size_t pick) : pick_(pick) {}
  size_t Choose(absl::Span<const CutFetch> cuts) override {
    seen.assign(cuts.begin(), cuts.end());
    return cuts[std::min(pick_, cuts.size() - 1)].cut;
  }
  std::vector<CutFetch> seen;

 private:
  size_t pick_;
};

std::vector<std::string> Chain(const std::string& tag, size_t n) {
  std::vector<std::string> keys;
  for (size_t i = 0; i < n; ++i) keys.push_back(absl::StrCat(tag, "-", i));
  return keys;
}

std::vector<BlockKey> Keys(const std::vector<std::string>& chain, size_t n) {
  std::vector<BlockKey> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Key(chain[i]));
  return out;
}

TEST_F(HybridCacheTest, LookupReturnsTheLongestRestorableCutAndWhatEachGroupLoads) {
  const auto chain = Chain("a", 7);
  // Window blocks only for the last two blocks; snapshots at 2, 4, 6 and 7.
  auto put = Save(chain, 7, 5, /*final_state=*/true);
  ASSERT_TRUE(put.ok()) << put.status();
  // Cuts 2, 4 and 6 lack their window: only the cut at 7 is restorable, and
  // nothing was unusable.
  EXPECT_EQ(put->blocks_unusable, 3u);  // the snapshots at 2, 4, 6
  auto r = cache_->Lookup(ns_, Keys(chain, 7), /*take_lease=*/false, absl::ZeroDuration());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->matched, 7u);
  ASSERT_EQ(r->groups.size(), 3u);
  EXPECT_EQ(r->groups[kFull].first_key, 0u);
  EXPECT_EQ(r->groups[kFull].blocks.size(), 7u);
  EXPECT_EQ(r->groups[kWindow].first_key, 5u);
  EXPECT_EQ(r->groups[kWindow].blocks.size(), 2u);
  EXPECT_EQ(r->groups[kState].first_key, 6u);
  ASSERT_EQ(r->groups[kState].blocks.size(), 1u);
  EXPECT_EQ(r->groups[kState].blocks[0].size, kStateBytes);
  // A prompt that diverges after block 5 gets no cut: 5 has no snapshot.
  std::vector<BlockKey> other = Keys(chain, 5);
  other.push_back(Key("elsewhere"));
  r = cache_->Lookup(ns_, other, false, absl::ZeroDuration());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->matched, 0u);
  ExpectNothingStranded("after one save");
}

TEST_F(HybridCacheTest, AChooserPicksAmongEveryRestorableCutAndItsBlocksAreLeased) {
  const auto chain = Chain("c", 8);
  // Every window block and a snapshot at each second block: cuts 2, 4, 6, 8.
  ASSERT_TRUE(Save(chain, 8, 0, /*final_state=*/false).ok());
  RecordingChooser chooser(2);  // 8, 6, 4, 2, 0: picks 4
  auto r = cache_->Lookup(ns_, Keys(chain, 8), /*take_lease=*/true, absl::ZeroDuration(), &chooser);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(chooser.seen.size(), 5u);
  const size_t want_cuts[] = {8, 6, 4, 2, 0};
  for (size_t i = 0; i < 5; ++i) {
    const size_t k = want_cuts[i];
    EXPECT_EQ(chooser.seen[i].cut, k);
    // k full blocks, min(k, 2) window blocks, a snapshot: all on the host.
    const uint64_t bytes =
        k == 0 ? 0 : k * kAttentionBytes + std::min<size_t>(k, 2) * kAttentionBytes + kStateBytes;
    EXPECT_EQ(chooser.seen[i].host_bytes, bytes) << "cut " << k;
    EXPECT_EQ(chooser.seen[i].nvme_bytes, 0u) << "cut " << k;
  }
  EXPECT_EQ(r->matched, 8u);
  EXPECT_EQ(r->chosen_cut, 4u);
  ASSERT_EQ(r->chosen_groups.size(), 3u);
  EXPECT_EQ(r->chosen_groups[kFull].first_key, 0u);
  EXPECT_EQ(r->chosen_groups[kFull].blocks.size(), 4u);
  EXPECT_EQ(r->chosen_groups[kWindow].first_key, 2u);
  EXPECT_EQ(r->chosen_groups[kWindow].blocks.size(), 2u);
  EXPECT_EQ(r->chosen_groups[kState].first_key, 3u);
  ASSERT_EQ(r->chosen_groups[kState].blocks.size(), 1u);
  EXPECT_EQ(r->chosen_groups[kState].blocks[0].key, Key(chain[3]));
  // The lease: cut 8's 8 + 2 + 1 blocks and cut 4's window and snapshot.
  auto released = cache_->Release(r->lease_id);
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(*released, 14u);
  // Choosing the longest cut or 0 lists nothing more.
  RecordingChooser longest(0), none(9);
  r = cache_->Lookup(ns_, Keys(chain, 8), true, absl::ZeroDuration(), &longest);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->chosen_cut, 8u);
  EXPECT_TRUE(r->chosen_groups.empty());
  EXPECT_EQ(*cache_->Release(r->lease_id), 11u);
  r = cache_->Lookup(ns_, Keys(chain, 8), true, absl::ZeroDuration(), &none);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->chosen_cut, 0u);
  EXPECT_TRUE(r->chosen_groups.empty());
  EXPECT_EQ(*cache_->Release(r->lease_id), 11u);
  // A cut that is not restorable (3) is taken as the longest.
  class Bogus final : public CutChooser {
    size_t Choose(absl::Span<const CutFetch>) override { return 3; }
  } bogus;
  r = cache_->Lookup(ns_, Keys(chain, 8), true, absl::ZeroDuration(), &bogus);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->chosen_cut, 8u);
  EXPECT_TRUE(r->chosen_groups.empty());
  EXPECT_EQ(*cache_->Release(r->lease_id), 11u);
  // Without a lease a shorter cut is still listed; nothing stays pinned.
  RecordingChooser shorter(1);  // 6
  r = cache_->Lookup(ns_, Keys(chain, 8), false, absl::ZeroDuration(), &shorter);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->chosen_cut, 6u);
  ASSERT_EQ(r->chosen_groups.size(), 3u);
  EXPECT_EQ(r->chosen_groups[kWindow].first_key, 4u);
  EXPECT_TRUE(r->lease_id.empty());
  EXPECT_EQ(cache_->Snapshot().active_leases, 0u);
}

TEST_F(HybridCacheTest, AttentionPastTheLastSnapshotIsNotKept) {
  const auto chain = Chain("b", 5);
  auto put = Save(chain, 5, 0, /*final_state=*/false);  // snapshots at 2 and 4 only
  ASSERT_TRUE(put.ok()) << put.status();
  // Block 5's attention and window bytes serve no cut.
  EXPECT_EQ(put->blocks_unusable, 2u);
  EXPECT_FALSE(cache_->HoldsForTesting(ns_, kFull, Key(chain[4])));
  EXPECT_TRUE(cache_->HoldsForTesting(ns_, kFull, Key(chain[3])));
  auto r = cache_->Lookup(ns_, Keys(chain, 5), false, absl::ZeroDuration());
  EXPECT_EQ(r->matched, 4u);
  ExpectNothingStranded("tail");
}

TEST_F(HybridCacheTest, GroupApiRefusesWhatItCannotDo) {
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  absl::Status st = (*batch)->StartBlock(Key("x"), BlockKey(), kAttentionBytes, 3);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("group 3"), std::string::npos) << st;
  batch = cache_->BeginPut(ns_);
  st = (*batch)->StartBlock(Key("x"), BlockKey(), kStateBytes + 1, kState);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(cache_->Read(ns_, {Key("x")}, true, 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A group's storage id is not a namespace an engine can address.
  EXPECT_EQ(cache_->BeginPut(NamespaceId::OfGroup(ns_, 0)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->Lookup(NamespaceId::OfGroup(ns_, 1), {Key("x")}, false, absl::ZeroDuration())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  // The namespace counts once against the limits.
  EXPECT_EQ(cache_->Snapshot().namespaces, 1u);
}

TEST_F(HybridCacheTest, DeleteAndCloseTakeEveryGroup) {
  const auto chain = Chain("d", 4);
  ASSERT_TRUE(Save(chain, 4, 0, true).ok());
  // Deleting block 3 (recursive: and 4) leaves the cut at 2.
  auto del = cache_->Delete(ns_, {Key(chain[2])}, /*recursive=*/true);
  ASSERT_TRUE(del.ok()) << del.status();
  auto r = cache_->Lookup(ns_, Keys(chain, 4), false, absl::ZeroDuration());
  EXPECT_EQ(r->matched, 2u);
  ExpectNothingStranded("delete");
  EXPECT_EQ(cache_->Delete(ns_, {Key(chain[0])}, false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto closed = cache_->CloseNamespace(ns_, /*drop_blocks=*/true);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->blocks_kept, 0u);
  EXPECT_EQ(cache_->Snapshot().blocks, 0u);
}

TEST_F(HybridCacheTest, OneRequestsBatchesAreJudgedWhole) {
  const auto chain = Chain("w", 2);
  // Two batches: the attention blocks, then the window and the snapshot.
  auto two_batches = [&](BlockCache::DeferredSweep* whole) {
    auto first = cache_->BeginPut(ns_, whole);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_TRUE((*first)
                      ->StartBlock(Key(chain[i]), i ? Key(chain[i - 1]) : BlockKey(),
                                   kAttentionBytes, kFull)
                      .ok());
      ASSERT_TRUE((*first)->Append(Content(kFull, chain[i])).ok());
    }
    ASSERT_TRUE((*first)->Commit().ok());
    auto second = cache_->BeginPut(ns_, whole);
    for (uint32_t g : {kWindow, kState}) {
      for (size_t i = g == kState ? 1 : 0; i < 2; ++i) {
        ASSERT_TRUE((*second)->StartBlock(Key(chain[i]), BlockKey(), SizeOf(g), g).ok());
        ASSERT_TRUE((*second)->Append(Content(g, chain[i])).ok());
      }
    }
    auto r = (*second)->Commit();
    ASSERT_TRUE(r.ok()) << r.status();
  };
  // Alone, the first batch serves no cut and goes at once; the second then
  // has nothing to restore with.
  two_batches(nullptr);
  EXPECT_FALSE(cache_->HoldsForTesting(ns_, kFull, Key(chain[0])));
  EXPECT_EQ(cache_->Lookup(ns_, Keys(chain, 2), false, absl::ZeroDuration())->matched, 0u);
  // Judged whole, the two make cut 2.
  {
    auto whole = cache_->DeferSweeps(ns_);
    two_batches(whole.get());
    EXPECT_TRUE(cache_->HoldsForTesting(ns_, kFull, Key(chain[0])));
  }
  EXPECT_EQ(cache_->Lookup(ns_, Keys(chain, 2), false, absl::ZeroDuration())->matched, 2u);
  ExpectNothingStranded("judged whole");
}

TEST_F(HybridCacheTest, NvmeAdmissionOfTheNamespaceHoldsForItsGroups) {
  ASSERT_TRUE(cache_->SetNvmeAdmission(ns_, false).ok());
  const auto chain = Chain("n", 4);
  ASSERT_TRUE(Save(chain, 4, 0, true).ok());
  cache_->DrainWrites(absl::Now() + absl::Seconds(5));
  for (const NamespaceSnapshot& n : cache_->Namespaces(/*scan_for_stranded=*/true)) {
    for (const GroupSnapshot& g : n.groups) EXPECT_EQ(g.on_nvme_blocks, 0u);
  }
  ASSERT_TRUE(cache_->SetNvmeAdmission(ns_, true).ok());
  cache_->DrainWrites(absl::Now() + absl::Seconds(5));
  uint64_t on_nvme = 0;
  for (const NamespaceSnapshot& n : cache_->Namespaces(/*scan_for_stranded=*/true)) {
    for (const GroupSnapshot& g : n.groups) on_nvme += g.on_nvme_blocks;
  }
  EXPECT_GT(on_nvme, 0u);
}

TEST_F(HybridCacheTest, EvictionsAreCountedPerGroup) {
  // Two long prompts overflow the 1 MiB host tier (no mover runs here, so
  // nothing has an NVMe copy): the first one's blocks are evicted.
  for (const char* tag : {"e1", "e2"}) {
    const auto chain = Chain(tag, 60);
    auto put = Save(chain, 60, 60 - kWindowBlocks, true);
    ASSERT_TRUE(put.ok()) << put.status();
  }
  uint64_t per_group = 0;
  for (const NamespaceSnapshot& n : cache_->Namespaces()) {
    for (const GroupSnapshot& g : n.groups) per_group += g.evictions;
  }
  const CacheSnapshot snap = cache_->Snapshot();
  EXPECT_GT(per_group, 0u);
  EXPECT_EQ(per_group, snap.counters.evictions + snap.counters.nvme_evictions);
  ExpectNothingStranded("after evictions");
}

TEST(HybridCacheSpineTest, ASecondFullAttentionGroupFollowsTheFirstsChain) {
  FakeClock clock;
  BlockCacheOptions o;
  o.host_bytes = 1 * kMiB;
  o.slab_bytes = 256 * kKiB;
  o.max_block_bytes = 64 * kKiB;
  auto cache = *BlockCache::Create(o, &clock);
  NamespaceSpec s;
  s.model_id = "two-full";
  s.layout = KvLayout{2, 1, 64, DType::kBf16, 16, 0, 1};
  s.groups = {{GroupKind::kFullAttention, {0}, 0, 0, 0}, {GroupKind::kFullAttention, {1}, 0, 0, 0}};
  const NamespaceId ns = cache->OpenNamespace(s)->id;
  const std::vector<uint8_t> bytes(4096, 7);
  auto batch = *cache->BeginPut(ns);
  // Group 1 before group 0 has the key: refused, naming what to do.
  absl::Status st = batch->StartBlock(Key("a"), BlockKey(), 4096, 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  batch = *cache->BeginPut(ns);
  ASSERT_TRUE(batch->StartBlock(Key("a"), BlockKey(), 4096, 0).ok());
  ASSERT_TRUE(batch->Append(bytes).ok());
  ASSERT_TRUE(batch->StartBlock(Key("b"), Key("a"), 4096, 0).ok());
  ASSERT_TRUE(batch->Append(bytes).ok());
  ASSERT_TRUE(batch->StartBlock(Key("a"), BlockKey(), 4096, 1).ok());
  ASSERT_TRUE(batch->Append(bytes).ok());
  // Another parent than group 0's for "b": refused.
  st = batch->StartBlock(Key("b"), Key("x"), 4096, 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("group 0 has"), std::string::npos) << st;
}

TEST_F(HybridCacheTest, RandomSavesLookupsLoadsEvictionsAndRestartsKeepInvariant9) {
  std::mt19937 rng(1818);
  std::vector<std::vector<std::string>> chains;
  int next = 0;
  int hits = 0, restarts = 0, partial_plans = 0;
  uint64_t removed = 0, unusable = 0;  // over every run of the cache
  for (int op = 0; op < 600; ++op) {
    const std::string where = absl::StrCat("op ", op);
    const int kind = static_cast<int>(rng() % 20);
    if (chains.empty() || kind < 7) {
      // A new prompt: a fresh chain, or a branch of an old one.
      std::vector<std::string> chain;
      if (!chains.empty() && rng() % 2 == 0) {
        const auto& base = chains[rng() % chains.size()];
        chain.assign(base.begin(), base.begin() + 1 + rng() % base.size());
      }
      const size_t len = chain.size() + 1 + rng() % 8;
      while (chain.size() < len) chain.push_back(absl::StrCat("k", next++));
      // The window's last blocks as an engine holds them, or (a third of
      // the saves) every window block, which makes earlier cuts restorable.
      size_t window_from = len > kWindowBlocks ? len - kWindowBlocks - rng() % 3 : 0;
      if (rng() % 3 == 0) window_from = 0;
      auto put = Save(chain, len, window_from, rng() % 4 != 0);
      ASSERT_TRUE(put.ok()) << where << ": " << put.status();
      chains.push_back(std::move(chain));
    } else if (kind < 15) {
      // Recent prompts half the time (older ones are mostly evicted).
      const size_t recent = std::min<size_t>(chains.size(), 4);
      const auto& chain =
          rng() % 2 ? chains[chains.size() - 1 - rng() % recent] : chains[rng() % chains.size()];
      const size_t n = rng() % 2 ? chain.size() : 1 + rng() % chain.size();
      const std::vector<BlockKey> keys = Keys(chain, n);
      const size_t expect = OracleCut(keys);
      // Half the Lookups plan among every restorable cut, picking one at
      // random: each cut listed must be restorable, and every one listed.
      std::optional<RecordingChooser> chooser;
      if (rng() % 2) chooser.emplace(1 + rng() % 3);  // a shorter cut if there is one
      auto r = cache_->Lookup(ns_, keys, /*take_lease=*/true, absl::ZeroDuration(),
                              chooser ? &*chooser : nullptr);
      ASSERT_TRUE(r.ok()) << where << ": " << r.status();
      ASSERT_EQ(r->matched, expect) << where;
      hits += r->matched > 0;
      const bool planned = chooser.has_value() && r->matched > 0;
      if (planned) {
        std::vector<size_t> want;
        for (size_t k = expect; k > 0; --k) {
          if (OracleCut(Keys(chain, k)) == k) want.push_back(k);
        }
        want.push_back(0);
        ASSERT_EQ(chooser->seen.size(), want.size()) << where;
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(chooser->seen[i].cut, want[i]) << where;
          uint64_t bytes = 0;
          for (uint32_t g = 0; g < 3; ++g)
            bytes += LoadRange(Rules()[g], want[i]).size() * SizeOf(g);
          ASSERT_EQ(chooser->seen[i].host_bytes + chooser->seen[i].nvme_bytes, bytes) << where;
        }
        partial_plans += r->chosen_cut > 0 && r->chosen_cut < r->matched;
      }
      // What the Lookup says to load: for the longest cut and, when the
      // chooser took a shorter one, for that one too (leased alike).
      const bool shorter = planned && r->chosen_cut > 0 && r->chosen_cut < r->matched;
      for (uint32_t g = 0; g < 3 && shorter; ++g) {
        const KeyRange range = LoadRange(Rules()[g], r->chosen_cut);
        ASSERT_EQ(r->chosen_groups[g].first_key, range.begin) << where;
        ASSERT_EQ(r->chosen_groups[g].blocks.size(), range.size()) << where;
        std::vector<BlockKey> load(keys.begin() + range.begin, keys.begin() + range.end);
        auto handles = cache_->Read(ns_, load, /*verify=*/true, g);
        ASSERT_TRUE(handles.ok()) << where << " group " << g << ": " << handles.status();
        for (size_t i = 0; i < handles->size(); ++i) {
          const auto want = Content(g, chain[range.begin + i]);
          const auto got = (*handles)[i].bytes();
          ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << where;
        }
      }
      for (uint32_t g = 0; g < 3; ++g) {
        const KeyRange range = LoadRange(Rules()[g], r->matched);
        ASSERT_EQ(r->groups[g].first_key, range.begin) << where;
        ASSERT_EQ(r->groups[g].blocks.size(), range.size()) << where;
        if (range.size() == 0) continue;
        // The load: byte-exact per group.
        std::vector<BlockKey> load(keys.begin() + range.begin, keys.begin() + range.end);
        auto handles = cache_->Read(ns_, load, /*verify=*/true, g);
        ASSERT_TRUE(handles.ok()) << where << " group " << g << ": " << handles.status();
        for (size_t i = 0; i < handles->size(); ++i) {
          const auto want = Content(g, chain[range.begin + i]);
          const auto got = (*handles)[i].bytes();
          ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()))
              << where << " group " << g << " key " << chain[range.begin + i];
        }
      }
      if (!r->lease_id.empty()) {
        ASSERT_TRUE(cache_->Release(r->lease_id).ok());
      }
    } else if (kind < 17) {
      cache_->Evict(ns_, 1 + rng() % 6);
    } else if (kind < 19) {
      cache_->RunMoverOnce();
    } else {
      cache_->DrainWrites(absl::Now() + absl::Seconds(5));
      const CacheCounters before = cache_->Snapshot().counters;
      removed += before.evictions + before.blocks_deleted;
      unusable += before.group_blocks_unusable;
      Open();  // a clean restart: what was persisted comes back from NVMe
      ++restarts;
      if (HasFatalFailure()) return;
    }
    ExpectNothingStranded(where);
    if (HasFatalFailure()) return;
  }
  // The run did what it is for: hits, restarts, evictions and group sweeps.
  EXPECT_GT(hits, 50);
  EXPECT_GT(restarts, 5);
  // Which blocks survive depends on the mover's timing and the eviction
  // policy; a loaded machine saw as few as 10.
  EXPECT_GT(partial_plans, 4);
  const CacheCounters last = cache_->Snapshot().counters;
  EXPECT_GT(removed + last.evictions + last.blocks_deleted, 0u);
  EXPECT_GT(unusable + last.group_blocks_unusable, 0u);
}

}  // namespace
}  // namespace kvtier
