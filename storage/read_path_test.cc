#include "storage/read_path.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/host_tier_fixture.h"

namespace kvtier {
namespace {

// The host-only read path (no NVMe tier: nothing to promote).
class ReadPathTest : public HostTierFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeHostTier(4 * kBlock, kBlock, SpecWith64KiBBlocks("read-path")).ok());
    read_ = std::make_unique<ReadPath>(host_.get(), nullptr, &index_, &counters_);
  }

  absl::StatusOr<std::vector<BlockRecord*>> Pin(std::vector<BlockKey> keys) {
    return read_->Pin(
        ns_, keys,
        [](uint64_t) -> absl::StatusOr<SlabAllocator::Slot> {
          ADD_FAILURE() << "nothing to promote";
          return absl::InternalError("no");
        },
        &promotion_);
  }

  std::unique_ptr<ReadPath> read_;
  ReadPath::Promotion promotion_;
  TransferMeter meter_;
};

TEST_F(ReadPathTest, PinFailsWholeOnAMissingKey) {
  BlockRecord* a = Store("a");
  absl::StatusOr<std::vector<BlockRecord*>> pinned = Pin({Key("a"), Key("zz")});
  EXPECT_EQ(pinned.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pinned.status().message(), "block " + Key("zz").ToHex() + " is not cached");
  EXPECT_EQ(a->refs, 0u);
  EXPECT_EQ(a->uses, 1u);
}

TEST_F(ReadPathTest, PinsEachKeyAndCountsUses) {
  BlockRecord* a = Store("a");
  BlockRecord* b = Store("b", "a");
  absl::StatusOr<std::vector<BlockRecord*>> pinned = Pin({Key("a"), Key("b"), Key("a")});
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(*pinned, (std::vector<BlockRecord*>{a, b, a}));
  EXPECT_EQ(a->refs, 2u);
  EXPECT_EQ(a->uses, 3u);
  EXPECT_EQ(b->uses, 2u);
  EXPECT_TRUE(promotion_.empty());
  EXPECT_TRUE(read_->Verify(*pinned, &meter_).empty());
  ASSERT_TRUE(read_->Finish(*pinned, {}).ok());
  EXPECT_EQ(counters_.blocks_get, 3u);
  EXPECT_EQ(counters_.bytes_get, 3 * kBlock);
  for (BlockRecord* rec : *pinned) host_->Unpin(rec);
  EXPECT_EQ(a->refs, 0u);
}

TEST_F(ReadPathTest, CorruptBlockIsDroppedWithItsDescendants) {
  BlockRecord* a = Store("a");
  Store("b", "a");
  absl::StatusOr<std::vector<BlockRecord*>> pinned = Pin({Key("a")});
  ASSERT_TRUE(pinned.ok());
  host_->SlotData(a->slot)[100] ^= 1;
  const std::vector<BlockRecord*> corrupt = read_->Verify(*pinned, &meter_);
  EXPECT_EQ(corrupt, std::vector<BlockRecord*>{a});
  absl::Status s = read_->Finish(*pinned, corrupt);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "block " + Key("a").ToHex() + " failed its checksum and was dropped");
  EXPECT_EQ(counters_.checksum_mismatches, 1u);
  EXPECT_EQ(counters_.dropped_descendants, 1u);
  EXPECT_EQ(counters_.blocks_get, 0u);
  EXPECT_EQ(index_.size(), 0u);
  EXPECT_EQ(host_->removed_pinned(), 1u);  // our pin keeps a's record
  read_->DropCorrupt(a);                   // already dropped: not counted again
  EXPECT_EQ(counters_.checksum_mismatches, 1u);
  host_->Unpin(a);
  EXPECT_EQ(host_->removed_pinned(), 0u);
  EXPECT_EQ(host_->used_bytes(), 0u);
}

}  // namespace
}  // namespace kvtier
