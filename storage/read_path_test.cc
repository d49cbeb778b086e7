#include "storage/read_path.h"

#include <cstring>
#include <memory>
#include <string>

#include "base/checksum.h"
#include "gtest/gtest.h"

namespace kvtier {
namespace {

constexpr uint64_t kBlock = 64 * 1024;
BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

NamespaceSpec Spec() {
  NamespaceSpec s;
  s.model_id = "read-path";
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};
  return s;
}

// The host-only read path (no NVMe tier: nothing to promote).
class ReadPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto allocator = SlabAllocator::Create(4 * kBlock, kBlock);
    ASSERT_TRUE(allocator.ok());
    auto arena = HostArena::Create((*allocator)->capacity());
    ASSERT_TRUE(arena.ok());
    host_ = std::make_unique<HostTier>(std::move(*arena), std::move(*allocator), &index_,
                                       &namespaces_, &counters_);
    read_ = std::make_unique<ReadPath>(host_.get(), nullptr, &index_, &counters_);
    ns_ = NamespaceId::Of(Spec());
    ASSERT_TRUE(namespaces_.Open(ns_, Spec(), kBlock).ok());
  }

  BlockRecord* Store(const std::string& key, const std::string& parent = "") {
    absl::StatusOr<SlabAllocator::Slot> slot = host_->Allocate(kBlock);
    EXPECT_TRUE(slot.ok());
    std::memset(host_->SlotData(*slot), key[0], kBlock);
    auto rec = std::make_unique<BlockRecord>();
    rec->ns = ns_;
    rec->key = Key(key);
    if (!parent.empty()) rec->parent_key = Key(parent);
    rec->size = kBlock;
    rec->slot = *slot;
    rec->checksum = Checksum64({host_->SlotData(*slot), kBlock});
    rec->uses = 1;
    EXPECT_TRUE(index_.Insert(std::move(rec)).ok());
    namespaces_.AddBlocks(*namespaces_.FindOpen(ns_), 1, kBlock);
    host_->AddBlocks(1, kBlock);
    return index_.Find(ns_, Key(key));
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

  PrefixIndex index_;
  TenantQuotas quotas_{
      TenantLimits{.max_namespaces = 4, .max_leases = 4, .max_reserved_bytes = 4 * kBlock}};
  NamespaceTable namespaces_{4, &quotas_};
  CacheCounters counters_;
  std::unique_ptr<HostTier> host_;
  std::unique_ptr<ReadPath> read_;
  ReadPath::Promotion promotion_;
  TransferMeter meter_;
  NamespaceId ns_;
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
