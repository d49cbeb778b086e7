// BlockCache::PutBatch's own bookkeeping: reservations, tenant charges,
// landings and the slots held for dropped landings.
#include <memory>
#include <string>
#include <vector>

#include "base/checksum.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "storage/block_cache.h"

namespace kvtier {
namespace {

constexpr uint64_t kBlock = 64 * 1024;
BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

NamespaceSpec Spec(const std::string& tenant) {
  NamespaceSpec s;
  s.model_id = "put-batch";
  s.tenant = tenant;
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};  // 64 KiB blocks
  return s;
}

class PutBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BlockCacheOptions o;
    o.host_bytes = 16 * kBlock;
    o.slab_bytes = kBlock;
    o.max_block_bytes = kBlock;
    auto cache = BlockCache::Create(o, &clock_);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(*cache);
    ns_ = cache_->OpenNamespace(Spec("t"))->id;
  }

  FakeClock clock_;
  std::unique_ptr<BlockCache> cache_;
  NamespaceId ns_;
};

TEST_F(PutBatchTest, ReservationsAreChargedUntilTheBatchEnds) {
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ((*batch)->block_bytes(), kBlock);
  ASSERT_TRUE((*batch)->StartBlock(Key("a"), BlockKey(), 1000).ok());
  std::vector<uint8_t> data(1000, 7);
  ASSERT_TRUE((*batch)->Append(data).ok());
  ASSERT_TRUE((*batch)->StartBlock(Key("b"), Key("a"), 10).ok());
  EXPECT_EQ(cache_->UsageOf("t").reserved_bytes, 1010u);
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, 2 * 4096u);  // two 4 KiB slots
  batch->reset();  // abandoned: nothing stored, everything refunded
  EXPECT_EQ(cache_->UsageOf("t").reserved_bytes, 0u);
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, 0u);
  EXPECT_EQ(cache_->Snapshot().blocks, 0u);
}

TEST_F(PutBatchTest, KeepVerifiedPrefixHoldsTheSlotsOfDroppedLandings) {
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  std::vector<uint8_t> good(kBlock, 1), bad(kBlock, 2);
  const std::vector<std::pair<std::string, std::string>> chain = {
      {"a", ""}, {"b", "a"}, {"c", "b"}};
  std::vector<absl::Span<uint8_t>> slots;
  for (const auto& [key, parent] : chain) {
    auto slot = (*batch)->StartLanding(Key(key), parent.empty() ? BlockKey() : Key(parent), kBlock,
                                       Checksum64(good));
    ASSERT_TRUE(slot.ok());
    ASSERT_EQ(slot->size(), kBlock);
    slots.push_back(*slot);
  }
  std::copy(good.begin(), good.end(), slots[0].begin());
  std::copy(bad.begin(), bad.end(), slots[1].begin());  // does not match its checksum
  std::copy(good.begin(), good.end(), slots[2].begin());
  EXPECT_EQ((*batch)->KeepVerifiedPrefix(3), 1u);
  EXPECT_EQ((*batch)->blocks(), 1u);
  EXPECT_EQ((*batch)->held_slots(), 2u);
  absl::StatusOr<PutResult> result = (*batch)->Commit();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->blocks_stored, 1u);
  EXPECT_EQ(result->bytes_stored, kBlock);
  // The held slots stay reserved until the batch goes (a sender may still
  // write into them).
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, 3 * kBlock);
  batch->reset();
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, kBlock);
  EXPECT_EQ(cache_->Snapshot().host.blocks, 1u);
  EXPECT_EQ(cache_->UsageOf("t").reserved_bytes, 0u);
}

TEST_F(PutBatchTest, UnverifiedLandingIsRefusedAtCommit) {
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE((*batch)->StartLanding(Key("a"), BlockKey(), 100, 0).ok());
  absl::StatusOr<PutResult> result = (*batch)->Commit();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(result.status().message(),
            "block " + Key("a").ToHex() + " landed but was not verified");
  // The batch is dead now.
  EXPECT_EQ((*batch)->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PutBatchTest, CommitAbortsWhenTheNamespaceClosed) {
  auto batch = cache_->BeginPut(ns_);
  ASSERT_TRUE(batch.ok());
  ASSERT_TRUE((*batch)->StartBlock(Key("a"), BlockKey(), 4).ok());
  std::vector<uint8_t> data(4, 9);
  ASSERT_TRUE((*batch)->Append(data).ok());
  ASSERT_TRUE(cache_->CloseNamespace(ns_, /*drop_blocks=*/true).ok());
  absl::StatusOr<PutResult> result = (*batch)->Commit();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(result.status().message(), "namespace " + ns_.ToHex() + " was closed during the Put");
}

}  // namespace
}  // namespace kvtier
