#include "storage/block_cache.h"

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
#include "storage/block_cache_test_fixture.h"

namespace kvtier {
namespace {

using block_cache_test::BlockCacheTest;
using block_cache_test::Content;
using block_cache_test::kKiB;
using block_cache_test::kMiB;

// Landing: bytes written straight into reserved slots (as a peer transfer
// does) are indexed only once verified, and only as a verified prefix.
TEST_F(BlockCacheTest, LandedBlocksAreIndexedOnlyAsTheirVerifiedPrefix) {
  ASSERT_TRUE(Put(ns_, {"a"}).ok());  // already cached: nothing to receive
  const CacheSnapshot before = cache_->Snapshot();
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  std::vector<std::string> chain = {"a", "b", "c", "d"};
  std::string parent;
  for (const std::string& k : chain) {
    std::vector<uint8_t> data = Content(ns_.ToHex(), k, 64 * kKiB);
    absl::StatusOr<absl::Span<uint8_t>> slot = (*batch)->StartLanding(
        Key(k), parent.empty() ? BlockKey() : Key(parent), data.size(), Checksum64(data));
    ASSERT_TRUE(slot.ok()) << slot.status();
    if (k == "a") {
      EXPECT_TRUE(slot->empty());
    } else {
      ASSERT_EQ(slot->size(), data.size());
      std::memcpy(slot->data(), data.data(), data.size());
      if (k == "c") (*slot)[100] ^= 1;  // damaged on the way
    }
    parent = k;
  }
  // Before commit nothing of it is visible.
  EXPECT_EQ(Matched(ns_, chain), 1u);
  EXPECT_EQ((*batch)->KeepVerifiedPrefix(4), 2u);  // a, b; c failed, d follows it
  EXPECT_EQ((*batch)->held_slots(), 2u);
  ASSERT_TRUE((*batch)->Commit().ok());
  EXPECT_EQ(Matched(ns_, chain), 2u);
  // c and d stay reserved while the batch lives (late bytes may still come)...
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, before.host.used_bytes + 3 * 64 * kKiB);
  batch->reset();
  // ...and go back with it: usage grew by exactly the one block stored.
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, before.host.used_bytes + 64 * kKiB);
  auto handles = cache_->Read(ns_, Keys({"b"}));
  ASSERT_TRUE(handles.ok()) << handles.status();
  std::vector<uint8_t> want = Content(ns_.ToHex(), "b", 64 * kKiB);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), (*handles)[0].bytes().begin()));
  handles->clear();
  EXPECT_EQ(cache_->Snapshot().host.stored_bytes, before.host.stored_bytes + 64 * kKiB);
}

TEST_F(BlockCacheTest, UnverifiedLandingsAreNeverCommittedAndARefusedOneKeepsTheBatch) {
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  std::vector<uint8_t> data = Content(ns_.ToHex(), "u", 64 * kKiB);
  auto slot = (*batch)->StartLanding(Key("u"), BlockKey(), data.size(), Checksum64(data));
  ASSERT_TRUE(slot.ok());
  std::memcpy(slot->data(), data.data(), data.size());
  // A refused landing (its parent is nowhere) does not end the batch.
  EXPECT_EQ((*batch)->StartLanding(Key("w"), Key("nowhere"), 1000, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*batch)->blocks(), 1u);
  // Right bytes, but never verified: refused.
  EXPECT_EQ((*batch)->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Matched(ns_, {"u"}), 0u);

  auto again = cache_->BeginPut(ns_);
  ASSERT_TRUE(again.ok());
  slot = (*again)->StartLanding(Key("u"), BlockKey(), data.size(), Checksum64(data));
  ASSERT_TRUE(slot.ok());
  std::memcpy(slot->data(), data.data(), data.size());
  EXPECT_EQ((*again)->StartLanding(Key("w"), Key("nowhere"), 1000, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*again)->KeepVerifiedPrefix(1), 1u);
  ASSERT_TRUE((*again)->Commit().ok());
  EXPECT_EQ(Matched(ns_, {"u"}), 1u);
}

// Filling: the caller copies into the slots itself (Save on two threads)
// and names each block's checksum; nothing is indexed until every block is
// filled, and a checksum that does not match the bytes is caught on read.
TEST_F(BlockCacheTest, FilledBlocksCommitOnlyOnceEveryOneIsFilled) {
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  std::vector<uint8_t> a = Content(ns_.ToHex(), "fa", 64 * kKiB);
  std::vector<uint8_t> b = Content(ns_.ToHex(), "fb", 64 * kKiB);
  auto slot_a = (*batch)->StartFill(Key("fa"), BlockKey(), a.size());
  auto slot_b = (*batch)->StartFill(Key("fb"), Key("fa"), b.size());  // a not filled yet
  ASSERT_TRUE(slot_a.ok() && slot_b.ok());
  std::memcpy(slot_b->data(), b.data(), b.size());  // in any order
  std::memcpy(slot_a->data(), a.data(), a.size());
  ASSERT_TRUE((*batch)->Filled(1, Checksum64(b)).ok());
  EXPECT_EQ(Matched(ns_, {"fa", "fb"}), 0u);
  ASSERT_TRUE((*batch)->Filled(0, Checksum64(a)).ok());
  ASSERT_TRUE((*batch)->Commit().ok());
  EXPECT_EQ(Matched(ns_, {"fa", "fb"}), 2u);

  // Misuse ends the batch and stores nothing.
  auto unfilled = cache_->BeginPut(ns_);
  ASSERT_TRUE((*unfilled)->StartFill(Key("u1"), BlockKey(), 4096).ok());
  EXPECT_EQ((*unfilled)->Commit().status().code(), absl::StatusCode::kInvalidArgument);
  auto appended = cache_->BeginPut(ns_);
  ASSERT_TRUE((*appended)->StartFill(Key("u2"), BlockKey(), 4096).ok());
  EXPECT_EQ((*appended)->Append(std::vector<uint8_t>(4096)).code(),
            absl::StatusCode::kInvalidArgument);
  auto twice = cache_->BeginPut(ns_);
  ASSERT_TRUE((*twice)->StartFill(Key("u3"), BlockKey(), 4096).ok());
  ASSERT_TRUE((*twice)->Filled(0, 0).ok());
  EXPECT_EQ((*twice)->Filled(0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*twice)->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Matched(ns_, {"u1"}) + Matched(ns_, {"u2"}) + Matched(ns_, {"u3"}), 0u);

  // A wrong checksum is never served: the read drops the block.
  auto wrong = cache_->BeginPut(ns_);
  auto slot = (*wrong)->StartFill(Key("w"), BlockKey(), a.size());
  ASSERT_TRUE(slot.ok());
  std::memcpy(slot->data(), a.data(), a.size());
  ASSERT_TRUE((*wrong)->Filled(0, Checksum64(a) ^ 1).ok());
  ASSERT_TRUE((*wrong)->Commit().ok());
  EXPECT_EQ(cache_->Read(ns_, Keys({"w"})).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BlockCacheTest, LandingThatDidNotArriveStoresNothing) {
  const CacheSnapshot before = cache_->Snapshot();
  {
    auto batch = cache_->BeginPut(ns_);
    ASSERT_TRUE(batch.ok());
    std::vector<uint8_t> data = Content(ns_.ToHex(), "x", 64 * kKiB);
    auto slot = (*batch)->StartLanding(Key("x"), BlockKey(), data.size(), Checksum64(data));
    ASSERT_TRUE(slot.ok());
    // Even bytes that happen to be right do not count when the transfer
    // did not report them received.
    std::memcpy(slot->data(), data.data(), data.size());
    EXPECT_EQ((*batch)->KeepVerifiedPrefix(0), 0u);
    EXPECT_EQ((*batch)->blocks(), 0u);
    EXPECT_FALSE((*batch)->Commit().ok());
  }
  {
    // Abandoned without a verify: the batch frees its slots.
    auto batch = cache_->BeginPut(ns_);
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE((*batch)->StartLanding(Key("y"), BlockKey(), 1000, 0).ok());
  }
  EXPECT_EQ(Matched(ns_, {"x"}), 0u);
  EXPECT_EQ(Matched(ns_, {"y"}), 0u);
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, before.host.used_bytes);
}

TEST_F(BlockCacheTest, PutThenReadReturnsTheSameBytes) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  auto handles = cache_->Read(ns_, Keys({"c", "a"}));
  ASSERT_TRUE(handles.ok()) << handles.status();
  ASSERT_EQ(handles->size(), 2u);
  auto c = Content(ns_.ToHex(), "c", 64 * kKiB);
  auto a = Content(ns_.ToHex(), "a", 64 * kKiB);
  EXPECT_TRUE(std::equal(c.begin(), c.end(), (*handles)[0].bytes().begin()));
  EXPECT_TRUE(std::equal(a.begin(), a.end(), (*handles)[1].bytes().begin()));
  CacheSnapshot snap = cache_->Snapshot();
  EXPECT_EQ(snap.blocks, 3u);
  EXPECT_EQ(snap.bytes, 3 * 64 * kKiB);
  EXPECT_EQ(snap.counters.blocks_get, 2u);
}

TEST_F(BlockCacheTest, LookupMatchesTheLongestChainedPrefix) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  ASSERT_TRUE(Put(ns_, {"x"}).ok());
  EXPECT_EQ(Matched(ns_, {"a", "b", "c", "d"}), 3u);
  EXPECT_EQ(Matched(ns_, {"a", "b"}), 2u);
  EXPECT_EQ(Matched(ns_, {"q", "a"}), 0u);
  // "x" is cached but its parent is not "a": the chain breaks there.
  EXPECT_EQ(Matched(ns_, {"a", "x"}), 1u);
  // A lookup may start mid-chain.
  EXPECT_EQ(Matched(ns_, {"b", "c"}), 2u);
}

TEST_F(BlockCacheTest, BlocksNeverMatchAcrossNamespaces) {
  const NamespaceId salted = OpenNs("model-a", "tenant-b");
  const NamespaceId other = OpenNs("model-b", "");
  ASSERT_FALSE(salted == ns_);
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  EXPECT_EQ(Matched(salted, {"a", "b"}), 0u);
  EXPECT_EQ(Matched(other, {"a"}), 0u);
  EXPECT_EQ(cache_->Read(salted, Keys({"a"})).status().code(), absl::StatusCode::kNotFound);
  // The same keys in another namespace hold their own bytes.
  ASSERT_TRUE(Put(salted, {"a"}).ok());
  auto mine = cache_->Read(ns_, Keys({"a"}));
  auto theirs = cache_->Read(salted, Keys({"a"}));
  ASSERT_TRUE(mine.ok() && theirs.ok());
  auto expect_mine = Content(ns_.ToHex(), "a", 64 * kKiB);
  auto expect_theirs = Content(salted.ToHex(), "a", 64 * kKiB);
  EXPECT_TRUE(std::equal(expect_mine.begin(), expect_mine.end(), (*mine)[0].bytes().begin()));
  EXPECT_TRUE(std::equal(expect_theirs.begin(), expect_theirs.end(), (*theirs)[0].bytes().begin()));
}

TEST_F(BlockCacheTest, ChecksumMismatchIsAMissAndDropsTheSubtree) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  ASSERT_TRUE(Put(ns_, {"z"}).ok());
  auto bytes = cache_->MutableBytesForTesting(ns_, Key("b"));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[777] ^= 0x01;
  absl::Status s = cache_->Read(ns_, Keys({"a", "b"})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
  CacheSnapshot snap = cache_->Snapshot(true);
  EXPECT_EQ(snap.counters.checksum_mismatches, 1u);
  EXPECT_EQ(snap.counters.dropped_descendants, 1u);  // c
  EXPECT_EQ(snap.blocks, 2u);                        // a and z remain
  EXPECT_EQ(snap.stranded_blocks, 0u);
  EXPECT_EQ(Matched(ns_, {"a", "b", "c"}), 1u);
  // Nothing was handed out, and the dropped slots were freed.
  EXPECT_EQ(snap.counters.blocks_get, 0u);
  EXPECT_EQ(snap.host.used_bytes, 2 * 64 * kKiB);
  // The intact parent still reads fine.
  EXPECT_TRUE(cache_->Read(ns_, Keys({"a"})).ok());
}

TEST_F(BlockCacheTest, LeasePinsAgainstEvictionUntilReleaseOrExpiry) {
  // 8 MiB of 64 KiB blocks = 128 slots. Lease a chain of 4, then overfill:
  // unleased, its leaf would be the coldest block and go first.
  std::vector<std::string> roots;
  for (int i = 0; i < 4; ++i) roots.push_back(absl::StrCat("leased", i));
  ASSERT_TRUE(Put(ns_, roots).ok());
  auto lease = cache_->Lookup(ns_, Keys(roots), true, absl::ZeroDuration());
  ASSERT_TRUE(lease.ok());
  ASSERT_FALSE(lease->lease_id.empty());
  EXPECT_EQ(lease->lease_expiry, clock_.Now() + absl::Seconds(10));
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(Put(ns_, {absl::StrCat("fill", i)}).ok());
  EXPECT_EQ(Matched(ns_, {"leased0"}), 1u);
  EXPECT_EQ(Matched(ns_, {"leased3"}), 1u);
  EXPECT_GT(cache_->Snapshot().counters.evictions, 100u);
  // A plain existence check neither pins nor renews.
  clock_.Advance(absl::Seconds(9));
  EXPECT_EQ(Matched(ns_, {"leased0"}), 1u);
  clock_.Advance(absl::Seconds(2));  // lease expired
  EXPECT_EQ(cache_->Snapshot().active_leases, 0u);
  EXPECT_EQ(cache_->Release(lease->lease_id).status().code(), absl::StatusCode::kNotFound);
  // Unpinned, it ages out; used more than once, it outlives several
  // turnovers of blocks used once (the value policy), so fill 10 of them.
  for (int i = 300; i < 1580; ++i) ASSERT_TRUE(Put(ns_, {absl::StrCat("fill", i)}).ok());
  EXPECT_EQ(Matched(ns_, {"leased0"}), 0u);
  EXPECT_EQ(cache_->Snapshot().counters.leases_expired, 1u);
}

TEST_F(BlockCacheTest, ReleaseUnpinsAndUnknownLeaseIsNotFound) {
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  auto lease = cache_->Lookup(ns_, Keys({"a", "b", "c"}), true, absl::Seconds(5));
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(cache_->Delete(ns_, Keys({"b"}), false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*cache_->Release(lease->lease_id), 2u);
  EXPECT_EQ(cache_->Release(lease->lease_id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->Release("nope").status().code(), absl::StatusCode::kNotFound);
  // Regression: a released lease must not "expire" later.
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(cache_->Snapshot().counters.leases_expired, 0u);
  EXPECT_TRUE(cache_->Delete(ns_, Keys({"b"}), false).ok());
  // No lease is taken for an empty match, and TTLs are bounded.
  EXPECT_TRUE(cache_->Lookup(ns_, Keys({"zz"}), true, absl::ZeroDuration())->lease_id.empty());
  EXPECT_EQ(cache_->Lookup(ns_, Keys({"a"}), true, absl::Seconds(61)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->Snapshot().active_leases, 0u);
}

TEST_F(BlockCacheTest, DeleteNeverStrands) {
  ASSERT_TRUE(Put(ns_, {"a", "b", "c"}).ok());
  EXPECT_EQ(cache_->Delete(ns_, Keys({"a"}), false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache_->Delete(ns_, Keys({"a", "q"}), true).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->Snapshot().blocks, 3u);
  auto r = cache_->Delete(ns_, Keys({"b", "c"}), false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->blocks_deleted, 2u);
  ASSERT_TRUE(Put(ns_, {"b", "c"}, "a").ok());
  r = cache_->Delete(ns_, Keys({"a"}), true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->blocks_deleted, 3u);
  EXPECT_EQ(r->bytes_freed, 3 * 64 * kKiB);
  CacheSnapshot snap = cache_->Snapshot();
  EXPECT_EQ(snap.blocks, 0u);
  EXPECT_EQ(snap.host.used_bytes, 0u);
}

// A record knows its parent through the index, which unlinks a removed
// one; a handle keeps the parent it was made with, through the removal of
// its pinned block and of that parent (the peer tier sends it with the
// bytes).
TEST_F(BlockCacheTest, AReadHandleKeepsItsParentThroughRemoval) {
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  auto handles = cache_->Read(ns_, Keys({"a", "b"}), /*verify=*/false);
  ASSERT_TRUE(handles.ok()) << handles.status();
  EXPECT_TRUE((*handles)[0].parent().empty());
  EXPECT_EQ((*handles)[1].parent(), Key("a"));
  // Dropping a drops b too, while both are pinned.
  cache_->ReportChecksumMismatch((*handles)[0]);
  EXPECT_EQ(Matched(ns_, {"a", "b"}), 0u);
  EXPECT_EQ(cache_->Snapshot().blocks, 0u);
  EXPECT_EQ((*handles)[1].parent(), Key("a"));
  std::vector<uint8_t> want = Content(ns_.ToHex(), "b", 64 * kKiB);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), (*handles)[1].bytes().begin()));
  handles->clear();
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, 0u);
}

TEST_F(BlockCacheTest, FailedPutChangesNothing) {
  ASSERT_TRUE(Put(ns_, {"a"}).ok());
  const CacheSnapshot before = cache_->Snapshot();
  // Parent not cached.
  EXPECT_EQ(Put(ns_, {"x", "y"}, "nope").code(), absl::StatusCode::kFailedPrecondition);
  // Block larger than the namespace's block size (64 KiB).
  EXPECT_EQ(Put(ns_, {"x"}, "a", 64 * kKiB + 1).code(), absl::StatusCode::kInvalidArgument);
  // Key already cached under another parent.
  EXPECT_EQ(Put(ns_, {"q", "a"}).code(), absl::StatusCode::kAlreadyExists);
  {
    // Good first block, then a chunk that overruns the second: nothing lands.
    auto batch = *cache_->BeginPut(ns_);
    ASSERT_TRUE(batch->StartBlock(Key("m"), Key("a"), 4096).ok());
    std::vector<uint8_t> data(4096, 1);
    ASSERT_TRUE(batch->Append(data).ok());
    ASSERT_TRUE(batch->StartBlock(Key("n"), Key("m"), 100).ok());
    EXPECT_EQ(batch->Append(data).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(batch->Commit().ok());
  }
  {
    // Stream that ends mid-block.
    auto batch = *cache_->BeginPut(ns_);
    ASSERT_TRUE(batch->StartBlock(Key("m"), Key("a"), 4096).ok());
    EXPECT_EQ(batch->Commit().status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    // Key equal to its parent.
    auto batch = *cache_->BeginPut(ns_);
    EXPECT_EQ(batch->StartBlock(Key("s"), Key("s"), 1).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    // The same key twice in one Put.
    auto batch = *cache_->BeginPut(ns_);
    std::vector<uint8_t> one(1, 7);
    ASSERT_TRUE(batch->StartBlock(Key("d"), Key("a"), 1).ok());
    ASSERT_TRUE(batch->Append(one).ok());
    EXPECT_EQ(batch->StartBlock(Key("d"), Key("a"), 1).code(), absl::StatusCode::kInvalidArgument);
  }
  // Key cached with another size.
  EXPECT_EQ(Put(ns_, {"a"}, "", 4096).code(), absl::StatusCode::kAlreadyExists);
  const CacheSnapshot after = cache_->Snapshot();
  EXPECT_EQ(after.blocks, before.blocks);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.host.used_bytes, before.host.used_bytes);
  EXPECT_EQ(after.counters.blocks_put, before.counters.blocks_put);
  EXPECT_EQ(Matched(ns_, {"a", "m"}), 1u);
}

TEST_F(BlockCacheTest, RePutOfCachedBlockIsCountedNotDuplicated) {
  ASSERT_TRUE(Put(ns_, {"a", "b"}).ok());
  auto batch = *cache_->BeginPut(ns_);
  ASSERT_TRUE(batch->StartBlock(Key("b"), Key("a"), 64 * kKiB).ok());
  std::vector<uint8_t> junk(64 * kKiB, 9);
  ASSERT_TRUE(batch->Append(junk).ok());
  ASSERT_TRUE(batch->StartBlock(Key("c"), Key("b"), 10).ok());
  ASSERT_TRUE(batch->Append(absl::Span<const uint8_t>(junk).subspan(0, 10)).ok());
  auto r = batch->Commit();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocks_stored, 1u);
  EXPECT_EQ(r->blocks_already_cached, 1u);
  EXPECT_EQ(Matched(ns_, {"a", "b", "c"}), 3u);
  // The cached bytes of "b" were not replaced.
  auto h = cache_->Read(ns_, Keys({"b"}));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)[0].bytes().size(), 64 * kKiB);
}

TEST_F(BlockCacheTest, FullOfPinnedBlocksIsResourceExhausted) {
  // Hold every slot with an open Put batch; the next Put cannot evict.
  auto hog = *cache_->BeginPut(ns_);
  for (int i = 0; i < 128; ++i) {
    ASSERT_TRUE(hog->StartBlock(Key(absl::StrCat("h", i)), BlockKey(), 64 * kKiB).ok());
    std::vector<uint8_t> data(64 * kKiB, 3);
    ASSERT_TRUE(hog->Append(data).ok());
  }
  EXPECT_EQ(Put(ns_, {"x"}).code(), absl::StatusCode::kResourceExhausted);
  hog.reset();  // abandoned batch frees its slots
  EXPECT_TRUE(Put(ns_, {"x"}).ok());
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, 64 * kKiB);
}

TEST_F(BlockCacheTest, ReadPinsBlocksAgainstEvictionAndDeletion) {
  ASSERT_TRUE(Put(ns_, {"a"}).ok());
  auto h = cache_->Read(ns_, Keys({"a"}));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(cache_->Delete(ns_, Keys({"a"}), false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(Put(ns_, {absl::StrCat("f", i)}).ok());
  EXPECT_EQ(Matched(ns_, {"a"}), 1u);
  auto expect = Content(ns_.ToHex(), "a", 64 * kKiB);
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), (*h)[0].bytes().begin()));
}

TEST_F(BlockCacheTest, BlocksWorthMorePerByteOutliveCheaperOnes) {
  // Two namespaces share the 128-slot tier; a hit on b's blocks saves 8x the
  // recompute per byte. Both put the same stream of one-block chains.
  const NamespaceId b = OpenNs("model-b", "");
  ASSERT_TRUE(cache_->SetRetentionValue(ns_, 1e-10).ok());
  ASSERT_TRUE(cache_->SetRetentionValue(b, 8e-10).ok());
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(Put(ns_, {absl::StrCat("a", i)}).ok());
    ASSERT_TRUE(Put(b, {absl::StrCat("b", i)}).ok());
  }
  int kept_a = 0, kept_b = 0;
  for (int i = 0; i < 400; ++i) {
    kept_a += static_cast<int>(Matched(ns_, {absl::StrCat("a", i)}));
    kept_b += static_cast<int>(Matched(b, {absl::StrCat("b", i)}));
  }
  EXPECT_GT(kept_b, 3 * kept_a) << kept_a << " vs " << kept_b;
  EXPECT_EQ(cache_->SetRetentionValue(ns_, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->SetRetentionValue(ns_, std::nan("")).code(),
            absl::StatusCode::kInvalidArgument);
  NamespaceSpec unknown;
  unknown.model_id = "never-opened";
  unknown.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  EXPECT_EQ(cache_->SetRetentionValue(NamespaceId::Of(unknown), 1).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(BlockCacheTest, APartialLastBlockGoesFirstUnlessTheEngineAsks) {
  // Chains of a full block and a shorter last one (in the same slab class,
  // so they compete for the same slots). Unasked, the short tails are
  // reclaimed before any full block; asked (retention 35), they are not.
  auto put_chain = [&](const std::string& name, std::optional<uint8_t> retention) {
    auto batch = cache_->BeginPut(ns_);
    ASSERT_TRUE(batch.ok());
    (*batch)->set_retention(retention);
    const BlockKey head = *BlockKey::Create(name + "-head");
    const BlockKey tail = *BlockKey::Create(name + "-tail");
    ASSERT_TRUE((*batch)->StartBlock(head, BlockKey(), 64 * kKiB).ok());
    ASSERT_TRUE((*batch)->Append(std::vector<uint8_t>(64 * kKiB, 1)).ok());
    ASSERT_TRUE((*batch)->StartBlock(tail, head, 62 * kKiB).ok());
    ASSERT_TRUE((*batch)->Append(std::vector<uint8_t>(62 * kKiB, 2)).ok());
    ASSERT_TRUE((*batch)->Commit().ok());
  };
  for (int i = 0; i < 20; ++i) put_chain(absl::StrCat("plain", i), std::nullopt);
  for (int i = 0; i < 20; ++i) put_chain(absl::StrCat("asked", i), 35);
  // A tail Put on its own, its parent cached by an earlier Put (a turn that
  // continues a conversation): partial too.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(Put(ns_, {absl::StrCat("later", i, "-head")}).ok());
    ASSERT_TRUE(
        Put(ns_, {absl::StrCat("later", i, "-tail")}, absl::StrCat("later", i, "-head"), 62 * kKiB)
            .ok());
  }
  // 100 of the 128 slots are taken; 58 full blocks more: 30 blocks must go.
  for (int i = 0; i < 58; ++i) ASSERT_TRUE(Put(ns_, {absl::StrCat("fill", i)}).ok());
  int plain_tails = 0, asked_tails = 0, heads = 0;
  for (int i = 0; i < 20; ++i) {
    plain_tails +=
        Matched(ns_, {absl::StrCat("plain", i, "-head"), absl::StrCat("plain", i, "-tail")}) == 2;
    asked_tails +=
        Matched(ns_, {absl::StrCat("asked", i, "-head"), absl::StrCat("asked", i, "-tail")}) == 2;
    heads += Matched(ns_, {absl::StrCat("plain", i, "-head")});
  }
  int later_tails = 0;
  for (int i = 0; i < 10; ++i) {
    later_tails +=
        Matched(ns_, {absl::StrCat("later", i, "-head"), absl::StrCat("later", i, "-tail")}) == 2;
    heads += Matched(ns_, {absl::StrCat("later", i, "-head")});
  }
  EXPECT_EQ(plain_tails, 0) << "every unasked partial tail went first";
  EXPECT_EQ(later_tails, 0);
  EXPECT_EQ(asked_tails, 20);
  EXPECT_EQ(heads, 30) << "only the unasked tails had to go";
}

TEST_F(BlockCacheTest, SetRetentionReMarksTheMatchedPrefix) {
  // Two chains, "ended" the newer; marked 0, it goes before the older one.
  ASSERT_TRUE(Put(ns_, {"old0", "old1"}).ok());
  ASSERT_TRUE(Put(ns_, {"ended0", "ended1"}).ok());
  absl::StatusOr<size_t> set = cache_->SetRetention(ns_, Keys({"ended0", "ended1", "none"}), 0);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, 2u) << "the cached leading run only";
  // 124 free slots of 128; 126 more blocks: 2 must go.
  for (int i = 0; i < 126; ++i) ASSERT_TRUE(Put(ns_, {absl::StrCat("fill", i)}).ok());
  EXPECT_EQ(Matched(ns_, {"ended0"}), 0u);
  EXPECT_EQ(Matched(ns_, {"old0", "old1"}), 2u);
  NamespaceSpec unknown;
  unknown.model_id = "never-opened";
  unknown.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  EXPECT_EQ(cache_->SetRetention(NamespaceId::Of(unknown), Keys({"old0"}), 0).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kvtier
