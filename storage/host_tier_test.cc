#include "storage/host_tier.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace kvtier {
namespace {

constexpr uint64_t kBlock = 64 * 1024;
BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

NamespaceSpec Spec() {
  NamespaceSpec s;
  s.model_id = "host-tier";
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};  // 64 KiB blocks
  return s;
}

// Two slabs of one 64 KiB slot each: two blocks fill the tier.
class HostTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto allocator = SlabAllocator::Create(2 * kBlock, kBlock);
    ASSERT_TRUE(allocator.ok());
    auto arena = HostArena::Create((*allocator)->capacity());
    ASSERT_TRUE(arena.ok());
    tier_ = std::make_unique<HostTier>(std::move(*arena), std::move(*allocator), &index_,
                                       &namespaces_, &counters_);
    ns_ = NamespaceId::Of(Spec());
    ASSERT_TRUE(namespaces_.Open(ns_, Spec(), kBlock).ok());
  }

  BlockRecord* Store(const std::string& key, const std::string& parent = "") {
    absl::StatusOr<SlabAllocator::Slot> slot = tier_->Allocate(kBlock);
    EXPECT_TRUE(slot.ok()) << slot.status();
    auto rec = std::make_unique<BlockRecord>();
    rec->ns = ns_;
    rec->key = Key(key);
    if (!parent.empty()) rec->parent_key = Key(parent);
    rec->size = kBlock;
    rec->slot = *slot;
    rec->uses = 1;
    EXPECT_TRUE(index_.Insert(std::move(rec)).ok());
    namespaces_.AddBlocks(*namespaces_.FindOpen(ns_), 1, kBlock);
    tier_->AddBlocks(1, kBlock);
    return index_.Find(ns_, Key(key));
  }

  PrefixIndex index_;
  TenantQuotas quotas_{
      TenantLimits{.max_namespaces = 4, .max_leases = 4, .max_reserved_bytes = 4 * kBlock}};
  NamespaceTable namespaces_{4, &quotas_};
  CacheCounters counters_;
  std::unique_ptr<HostTier> tier_;
  NamespaceId ns_;
};

TEST_F(HostTierTest, FullTierEvictsTheColdestUnpinnedLeaf) {
  Store("a");
  Store("b");
  EXPECT_EQ(tier_->used_bytes(), 2 * kBlock);
  absl::StatusOr<SlabAllocator::Slot> slot = tier_->Allocate(kBlock);
  ASSERT_TRUE(slot.ok()) << slot.status();
  EXPECT_EQ(index_.Find(ns_, Key("a")), nullptr);  // the colder one
  EXPECT_NE(index_.Find(ns_, Key("b")), nullptr);
  EXPECT_EQ(counters_.evictions, 1u);
  EXPECT_EQ(tier_->blocks(), 1u);
  EXPECT_EQ(tier_->stored_bytes(), kBlock);
  EXPECT_EQ(namespaces_.FindAny(ns_)->blocks, 1u);
  EXPECT_EQ(namespaces_.total_bytes(), kBlock);
  tier_->Free(*slot);
  EXPECT_EQ(tier_->used_bytes(), kBlock);
}

TEST_F(HostTierTest, PinnedBlocksAndParentsAreNotEvicted) {
  BlockRecord* a = Store("a");
  Store("b", "a");  // a has a child; b is pinned below
  index_.AddRef(index_.Find(ns_, Key("b")));
  absl::StatusOr<SlabAllocator::Slot> slot = tier_->Allocate(kBlock);
  EXPECT_EQ(slot.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(slot.status().message(),
            "host tier is full: no room for a 65536-byte block; 131072 of 131072 bytes are held "
            "by pinned blocks, blocks with cached children, or other size classes");
  EXPECT_EQ(counters_.evictions, 0u);
  EXPECT_EQ(index_.Find(ns_, Key("a")), a);
  tier_->Unpin(index_.Find(ns_, Key("b")));
}

TEST_F(HostTierTest, RemovedPinnedRecordIsFreedAtItsLastUnpin) {
  BlockRecord* a = Store("a");
  index_.AddRef(a);
  index_.AddRef(a);
  tier_->Remove(a);
  EXPECT_EQ(index_.Find(ns_, Key("a")), nullptr);
  EXPECT_EQ(tier_->removed_pinned(), 1u);
  EXPECT_EQ(tier_->blocks(), 0u);          // no longer counted...
  EXPECT_EQ(tier_->used_bytes(), kBlock);  // ...but its slot is still held
  tier_->Unpin(a);
  EXPECT_EQ(tier_->removed_pinned(), 1u);
  tier_->Unpin(a);
  EXPECT_EQ(tier_->removed_pinned(), 0u);
  EXPECT_EQ(tier_->used_bytes(), 0u);
}

TEST_F(HostTierTest, DropSubtreeRemovesChildrenFirstAndCountsThem) {
  Store("a");
  Store("b", "a");
  tier_->DropSubtree(index_.Find(ns_, Key("a")));
  EXPECT_EQ(index_.size(), 0u);
  EXPECT_EQ(counters_.dropped_descendants, 1u);
  EXPECT_EQ(tier_->used_bytes(), 0u);
  EXPECT_EQ(namespaces_.FindAny(ns_)->blocks, 0u);  // open: kept while empty
}

}  // namespace
}  // namespace kvtier
