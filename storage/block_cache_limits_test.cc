// BlockCache limits, eviction, concurrency and namespace close (the
// fixture is block_cache_test_fixture.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/checksum.h"
#include "storage/block_cache.h"
#include "storage/block_cache_test_fixture.h"

namespace kvtier {
namespace {

using block_cache_test::BlockCacheTest;
using block_cache_test::Content;
using block_cache_test::kKiB;
using block_cache_test::kMiB;

TEST_F(BlockCacheTest, NamespaceLimitsAndUnknownNamespace) {
  NamespaceSpec bad;
  bad.model_id = "m";
  bad.layout = KvLayout{1, 1, 128, DType::kBf16, 0, 0, 1};
  EXPECT_EQ(cache_->OpenNamespace(bad).status().code(), absl::StatusCode::kInvalidArgument);
  NamespaceSpec same;
  same.model_id = "model-a";
  same.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  auto again = cache_->OpenNamespace(same);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->id, ns_);
  EXPECT_EQ(again->block_bytes, 64 * kKiB);
  NamespaceSpec unknown = same;
  unknown.model_id = "never-opened";
  const NamespaceId id = NamespaceId::Of(unknown);
  EXPECT_EQ(cache_->Lookup(id, Keys({"a"}), false, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->BeginPut(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->Read(id, Keys({"a"})).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->Delete(id, Keys({"a"}), false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->Lookup(ns_, {}, false, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(BlockCacheTest, EvictionIsBoundedAndNeverCascades) {
  // Fill the 8 MiB tier with 128 evictable 64 KiB roots.
  for (int i = 0; i < 128; ++i) ASSERT_TRUE(Put(ns_, {absl::StrCat("f", i)}).ok());
  ASSERT_EQ(cache_->Snapshot().host.used_bytes, 8 * kMiB);
  // Same class: exactly one victim, the coldest.
  ASSERT_TRUE(Put(ns_, {"new"}).ok());
  EXPECT_EQ(cache_->Snapshot().counters.evictions, 1u);
  EXPECT_EQ(Matched(ns_, {"f0"}), 0u);
  EXPECT_EQ(Matched(ns_, {"f1"}), 1u);
  // Another class (4 KiB): one whole slab of evictable blocks (16 blocks of
  // 64 KiB in a 1 MiB slab) is reclaimed, nothing more.
  ASSERT_TRUE(Put(ns_, {"small"}, "", 4096).ok());
  EXPECT_EQ(cache_->Snapshot().counters.evictions, 17u);
  EXPECT_EQ(cache_->Snapshot().blocks, 128u - 16u + 1u);
  // Pin one block in each of the two slabs of a 2 MiB tier: no slab is
  // reclaimable, and a block of a new class fails without evicting anything.
  Make(2 * kMiB, 1 * kMiB);
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(Put(ns_, {absl::StrCat("g", i)}).ok());
  auto l1 = cache_->Lookup(ns_, Keys({"g0"}), true, absl::ZeroDuration());
  auto l2 = cache_->Lookup(ns_, Keys({"g31"}), true, absl::ZeroDuration());
  ASSERT_TRUE(l1.ok() && l2.ok());
  NamespaceSpec big;
  big.model_id = "model-big";
  big.layout = KvLayout{1, 1, 128, DType::kBf16, 256, 0, 1};  // 128 KiB blocks
  const NamespaceId big_ns = cache_->OpenNamespace(big)->id;
  const CacheSnapshot before = cache_->Snapshot();
  EXPECT_EQ(Put(big_ns, {"x"}, "", 128 * kKiB).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache_->Snapshot().counters.evictions, before.counters.evictions);
  EXPECT_EQ(cache_->Snapshot().blocks, before.blocks);
}

TEST_F(BlockCacheTest, LeasesExpireOnThePutPathToo) {
  // Every slot leased; only Puts follow. Once the leases expire, a Put must
  // be able to evict (nothing else runs the expiry).
  for (int i = 0; i < 128; ++i) {
    const std::string k = absl::StrCat("l", i);
    ASSERT_TRUE(Put(ns_, {k}).ok());
    ASSERT_FALSE(cache_->Lookup(ns_, Keys({k}), true, absl::Seconds(5))->lease_id.empty());
  }
  EXPECT_EQ(Put(ns_, {"next"}).code(), absl::StatusCode::kResourceExhausted);
  clock_.Advance(absl::Seconds(6));
  EXPECT_TRUE(Put(ns_, {"next"}).ok());
}

TEST_F(BlockCacheTest, NamespaceAndLeaseLimitsAreResourceExhausted) {
  BlockCacheOptions o;
  o.host_bytes = 1 * kMiB;
  o.slab_bytes = 1 * kMiB;
  o.max_block_bytes = 1 * kMiB;
  o.max_namespaces = 2;
  o.max_leases = 1;
  cache_ = *BlockCache::Create(o, &clock_);
  ns_ = OpenNs("one", "");
  OpenNs("two", "");
  NamespaceSpec third;
  third.model_id = "three";
  third.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  absl::Status s = cache_->OpenNamespace(third).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_namespaces"), std::string::npos) << s;
  ASSERT_TRUE(Put(ns_, {"a"}).ok());
  ASSERT_TRUE(cache_->Lookup(ns_, Keys({"a"}), true, absl::ZeroDuration()).ok());
  EXPECT_EQ(cache_->Lookup(ns_, Keys({"a"}), true, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kResourceExhausted);
  // A lookup without a lease still works at the limit.
  EXPECT_EQ(Matched(ns_, {"a"}), 1u);
}

TEST_F(BlockCacheTest, PutWhoseParentIsDroppedMidwayAborts) {
  ASSERT_TRUE(Put(ns_, {"a"}).ok());
  const uint64_t used = cache_->Snapshot().host.used_bytes;
  auto batch = *cache_->BeginPut(ns_);
  std::vector<uint8_t> data(4096, 1);
  ASSERT_TRUE(batch->StartBlock(Key("b"), Key("a"), 4096).ok());
  ASSERT_TRUE(batch->Append(data).ok());
  // The parent fails its checksum while the Put is open: it is dropped
  // although the batch pins it.
  (*cache_->MutableBytesForTesting(ns_, Key("a")))[0] ^= 1;
  EXPECT_EQ(cache_->Read(ns_, Keys({"a"})).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(batch->Commit().status().code(), absl::StatusCode::kAborted);
  batch.reset();
  EXPECT_EQ(Matched(ns_, {"a"}), 0u);
  EXPECT_EQ(Matched(ns_, {"b"}), 0u);
  // Both the dropped parent's slot and the staged child's slot are free again.
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, used - 64 * kKiB);
  EXPECT_EQ(cache_->Snapshot(true).stranded_blocks, 0u);
}

// Several threads put, read (verifying bytes), lease, release and delete at
// once. Every byte read must be the byte put; at the end nothing is stranded
// and, with every block deleted, no memory is held.
TEST_F(BlockCacheTest, ConcurrentOperationsKeepInvariants) {
  Make(4 * kMiB, 1 * kMiB);
  std::atomic<int> bad_reads{0};
  auto worker = [&](int id) {
    std::mt19937_64 rng(1000 + id);
    for (int i = 0; i < 400; ++i) {
      const std::string base = absl::StrCat("t", id % 2, "-", rng() % 25);
      const int op = static_cast<int>(rng() % 5);
      if (op <= 1) {
        Put(ns_, {base, base + "x"}).IgnoreError();  // may conflict or find the tier full
      } else if (op == 2) {
        auto h = cache_->Read(ns_, Keys({base, base + "x"}));
        if (h.ok()) {
          for (const auto& handle : *h) {
            auto expect =
                Content(ns_.ToHex(), std::string(handle.key().bytes()), handle.bytes().size());
            if (!std::equal(expect.begin(), expect.end(), handle.bytes().begin())) ++bad_reads;
          }
        }
      } else if (op == 3) {
        auto l = cache_->Lookup(ns_, Keys({base, base + "x"}), true, absl::Seconds(1));
        if (l.ok() && !l->lease_id.empty() && rng() % 2) {
          cache_->Release(l->lease_id).IgnoreError();
        }
      } else {
        cache_->Delete(ns_, Keys({base}), true).IgnoreError();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad_reads.load(), 0);
  EXPECT_EQ(cache_->Snapshot(true).stranded_blocks, 0u);
  clock_.Advance(absl::Seconds(2));  // expire leftover leases
  for (int id = 0; id < 2; ++id) {
    for (int i = 0; i < 25; ++i) {
      cache_->Delete(ns_, Keys({absl::StrCat("t", id, "-", i)}), true).IgnoreError();
    }
  }
  const CacheSnapshot end = cache_->Snapshot(true);
  EXPECT_EQ(end.blocks, 0u);
  EXPECT_EQ(end.host.used_bytes, 0u);
  EXPECT_EQ(end.active_leases, 0u);
  EXPECT_GT(end.counters.blocks_put, 100u);
  EXPECT_GT(end.counters.blocks_get, 50u);
}

// Randomized eviction: chains of mixed block sizes overfill a small arena
// while leases, reads and deletes come and go. After every operation no
// block is stranded, and every cached block reads back byte-exact.
TEST_F(BlockCacheTest, RandomizedEvictionNeverStrands) {
  Make(4 * kMiB, 1 * kMiB);
  std::mt19937_64 rng(777);
  std::vector<std::string> cached_hint;
  std::vector<std::string> leases;
  int next = 0;
  for (int step = 0; step < 1500; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      // Extend a (possibly evicted) chain or start a new one.
      std::string parent;
      if (!cached_hint.empty() && rng() % 3 != 0) {
        parent = cached_hint[rng() % cached_hint.size()];
        if (Matched(ns_, {parent}) == 0) parent.clear();
      }
      std::vector<std::string> chain;
      const int len = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < len; ++i) chain.push_back(absl::StrCat("b", next++));
      const size_t size = (rng() % 2) ? 64 * kKiB : 4 * kKiB + rng() % (60 * kKiB);
      absl::Status s = Put(ns_, chain, parent, size);
      ASSERT_TRUE(s.ok() || s.code() == absl::StatusCode::kResourceExhausted) << s;
      if (s.ok()) cached_hint.insert(cached_hint.end(), chain.begin(), chain.end());
    } else if (op < 7 && !cached_hint.empty()) {
      auto r = cache_->Lookup(ns_, Keys({cached_hint[rng() % cached_hint.size()]}), true,
                              absl::Seconds(1 + rng() % 5));
      ASSERT_TRUE(r.ok());
      if (!r->lease_id.empty()) leases.push_back(r->lease_id);
    } else if (op < 8 && !leases.empty()) {
      cache_->Release(leases.back()).IgnoreError();  // may have expired
      leases.pop_back();
    } else if (op < 9) {
      clock_.Advance(absl::Milliseconds(rng() % 1000));
    } else if (!cached_hint.empty()) {
      const std::string k = cached_hint[rng() % cached_hint.size()];
      absl::Status s = cache_->Delete(ns_, Keys({k}), true).status();
      ASSERT_TRUE(s.ok() || s.code() == absl::StatusCode::kNotFound ||
                  s.code() == absl::StatusCode::kFailedPrecondition)
          << s;
    }
    ASSERT_EQ(cache_->Snapshot(true).stranded_blocks, 0u) << "step " << step;
  }
  // Every block still cached reads back with the bytes it was put with.
  size_t verified = 0;
  for (const std::string& k : cached_hint) {
    if (Matched(ns_, {k}) == 0) continue;
    auto h = cache_->Read(ns_, Keys({k}));
    ASSERT_TRUE(h.ok()) << h.status();
    auto bytes = (*h)[0].bytes();
    auto expect = Content(ns_.ToHex(), k, bytes.size());
    ASSERT_TRUE(std::equal(expect.begin(), expect.end(), bytes.begin())) << k;
    ++verified;
  }
  EXPECT_GT(verified, 10u);
  EXPECT_GT(cache_->Snapshot().counters.evictions, 100u);
}

// Operator eviction empties one namespace, children before parents, in
// batches; a leased block stays with its ancestors (never strand), and other
// namespaces are untouched.
TEST_F(BlockCacheTest, EvictEmptiesANamespaceButKeepsPinnedPrefixes) {
  const NamespaceId other = OpenNs("model-b", "");
  ASSERT_TRUE(Put(ns_, {"a", "b", "c", "d"}).ok());
  ASSERT_TRUE(Put(ns_, {"x", "y"}, "b").ok());  // a branch under b
  ASSERT_TRUE(Put(other, {"a", "b"}).ok());
  // Lease "a", "b", "x": x is pinned, so x, b and a stay.
  auto lease = cache_->Lookup(ns_, Keys({"a", "b", "x"}), true, absl::ZeroDuration());
  ASSERT_TRUE(lease.ok());
  ASSERT_EQ(lease->blocks.size(), 3u);

  EvictResult first = cache_->Evict(ns_, 2);  // two of c, d, y: leaves first
  EXPECT_EQ(first.blocks_evicted, 2u);
  EXPECT_EQ(first.blocks_left, 4u);
  EXPECT_EQ(cache_->Snapshot(true).stranded_blocks, 0u);
  EvictResult rest = cache_->Evict(ns_, 100);
  EXPECT_EQ(rest.blocks_evicted, 1u);  // c; a, b, x are leased
  EXPECT_EQ(rest.blocks_left, 3u);
  EXPECT_EQ(cache_->Evict(ns_, 100).blocks_evicted, 0u);
  EXPECT_EQ(Matched(ns_, {"a", "b", "x"}), 3u);
  EXPECT_EQ(cache_->Snapshot(true).stranded_blocks, 0u);
  EXPECT_EQ(Matched(other, {"a", "b"}), 2u);  // another namespace is untouched

  ASSERT_TRUE(cache_->Release(lease->lease_id).ok());
  EXPECT_EQ(cache_->Evict(ns_, 100).blocks_evicted, 3u);
  EXPECT_EQ(Matched(ns_, {"a"}), 0u);
  // Every namespace at once.
  EvictResult all = cache_->Evict(std::nullopt, 100);
  EXPECT_EQ(all.blocks_evicted, 2u);
  EXPECT_EQ(all.blocks_left, 0u);
  EXPECT_EQ(cache_->Snapshot().blocks, 0u);
}

TEST_F(BlockCacheTest, TopBlocksAreTheMostUsed) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Matched(ns_, {"a", "b"}), 2u);
  ASSERT_EQ(Matched(ns_, {"a"}), 1u);
  auto top = cache_->TopBlocks(ns_, 2);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->second, 3u);
  ASSERT_EQ(top->first.size(), 2u);
  EXPECT_EQ(top->first[0].key, Key("a"));
  EXPECT_EQ(top->first[1].key, Key("b"));
  EXPECT_GT(top->first[0].uses, top->first[1].uses);
  EXPECT_EQ(top->first[1].parent, Key("a"));
  EXPECT_EQ(top->first[0].children, 1u);
  EXPECT_TRUE(top->first[0].in_host);
  NamespaceSpec closed;
  closed.model_id = "never-opened";
  closed.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  EXPECT_EQ(cache_->TopBlocks(NamespaceId::Of(closed), 5).status().code(),
            absl::StatusCode::kNotFound);
}

// CloseNamespace: leases end, open Puts fail at Commit, pinned blocks stay
// (and serve again after a re-open), the rest go with drop_blocks, and the
// tenant's namespace and reservation shares come back.
TEST_F(BlockCacheTest, CloseNamespaceEndsLeasesAbortsPutsAndKeepsPinnedBlocks) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  ASSERT_TRUE(cache_->Lookup(ns_, Keys({"a", "b"}), true, absl::ZeroDuration()).ok());
  // A Put still open when the namespace closes (a root: it pins nothing).
  absl::StatusOr<std::unique_ptr<BlockCache::PutBatch>> open = cache_->BeginPut(ns_);
  ASSERT_TRUE(open.ok());
  ASSERT_TRUE((*open)->StartBlock(Key("d"), BlockKey(), 64 * kKiB).ok());
  EXPECT_EQ(cache_->UsageOf("").reserved_bytes, 64 * kKiB);
  // A running read pins "a".
  absl::StatusOr<std::vector<BlockCache::ReadHandle>> pinned = cache_->Read(ns_, Keys({"a"}));
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(cache_->UsageOf("").namespaces, 1u);

  absl::StatusOr<CloseResult> closed = cache_->CloseNamespace(ns_, /*drop_blocks=*/true);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->leases_released, 1u);
  EXPECT_EQ(closed->blocks_dropped, 2u);  // c, then b; a is pinned
  EXPECT_EQ(closed->blocks_kept, 1u);
  EXPECT_EQ(cache_->UsageOf("").namespaces, 0u);
  EXPECT_EQ(cache_->UsageOf("").leases, 0u);
  EXPECT_EQ(cache_->Lookup(ns_, Keys({"a"}), false, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  std::vector<uint8_t> d = Content(ns_.ToHex(), "d", 64 * kKiB);
  ASSERT_TRUE((*open)->Append(d).ok());
  EXPECT_EQ((*open)->Commit().status().code(), absl::StatusCode::kAborted);
  open->reset();
  EXPECT_EQ(cache_->UsageOf("").reserved_bytes, 0u);
  EXPECT_EQ(cache_->CloseNamespace(ns_, true).status().code(), absl::StatusCode::kNotFound);

  // Re-opened (same spec, same id): the kept block serves again, intact.
  pinned->clear();
  EXPECT_EQ(OpenNs("model-a", ""), ns_);
  absl::StatusOr<std::vector<BlockCache::ReadHandle>> again = cache_->Read(ns_, Keys({"a"}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(std::vector<uint8_t>((*again)[0].bytes().begin(), (*again)[0].bytes().end()),
            Content(ns_.ToHex(), "a", 64 * kKiB));
  EXPECT_EQ(Matched(ns_, {"a", "b"}), 1u);
  EXPECT_EQ(cache_->Snapshot(true).stranded_blocks, 0u);
}

// A namespace closed without drop_blocks keeps its blocks for a re-open, and
// one closed with no blocks is forgotten at once.
TEST_F(BlockCacheTest, CloseWithoutDropKeepsBlocks) {
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  absl::StatusOr<CloseResult> closed = cache_->CloseNamespace(ns_, /*drop_blocks=*/false);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->blocks_dropped, 0u);
  EXPECT_EQ(closed->blocks_kept, 2u);
  EXPECT_EQ(cache_->Namespaces().size(), 0u);  // kept, but not open
  EXPECT_EQ(cache_->Snapshot().blocks, 2u);
  EXPECT_EQ(OpenNs("model-a", ""), ns_);
  EXPECT_EQ(Matched(ns_, {"a", "b"}), 2u);
  const NamespaceId empty = OpenNs("model-b", "");
  ASSERT_TRUE(cache_->CloseNamespace(empty, false).ok());
  EXPECT_EQ(cache_->Namespaces().size(), 1u);
}

}  // namespace
}  // namespace kvtier
