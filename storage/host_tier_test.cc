#include "storage/host_tier.h"

#include "gtest/gtest.h"
#include "testing/host_tier_fixture.h"

namespace kvtier {
namespace {

// Two slabs of one 64 KiB slot each: two blocks fill the tier.
class HostTierTest : public HostTierFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeHostTier(2 * kBlock, kBlock, SpecWith64KiBBlocks("host-tier")).ok());
  }
};

TEST_F(HostTierTest, FullTierEvictsTheColdestUnpinnedLeaf) {
  Store("a");
  Store("b");
  EXPECT_EQ(host_->used_bytes(), 2 * kBlock);
  absl::StatusOr<SlabAllocator::Slot> slot = host_->Allocate(kBlock);
  ASSERT_TRUE(slot.ok()) << slot.status();
  EXPECT_EQ(index_.Find(ns_, Key("a")), nullptr);  // the colder one
  EXPECT_NE(index_.Find(ns_, Key("b")), nullptr);
  EXPECT_EQ(counters_.evictions, 1u);
  EXPECT_EQ(host_->blocks(), 1u);
  EXPECT_EQ(host_->stored_bytes(), kBlock);
  EXPECT_EQ(namespaces_.FindAny(ns_)->blocks, 1u);
  EXPECT_EQ(namespaces_.total_bytes(), kBlock);
  host_->Free(*slot);
  EXPECT_EQ(host_->used_bytes(), kBlock);
}

TEST_F(HostTierTest, PinnedBlocksAndParentsAreNotEvicted) {
  BlockRecord* a = Store("a");
  Store("b", "a");  // a has a child; b is pinned below
  index_.AddRef(index_.Find(ns_, Key("b")));
  absl::StatusOr<SlabAllocator::Slot> slot = host_->Allocate(kBlock);
  EXPECT_EQ(slot.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(slot.status().message(),
            "host tier is full: no room for a 65536-byte block; 131072 of 131072 bytes are held "
            "by pinned blocks, blocks with cached children, or other size classes");
  EXPECT_EQ(counters_.evictions, 0u);
  EXPECT_EQ(index_.Find(ns_, Key("a")), a);
  host_->Unpin(index_.Find(ns_, Key("b")));
}

TEST_F(HostTierTest, RemovedPinnedRecordIsFreedAtItsLastUnpin) {
  BlockRecord* a = Store("a");
  index_.AddRef(a);
  index_.AddRef(a);
  host_->Remove(a);
  EXPECT_EQ(index_.Find(ns_, Key("a")), nullptr);
  EXPECT_EQ(host_->removed_pinned(), 1u);
  EXPECT_EQ(host_->blocks(), 0u);          // no longer counted...
  EXPECT_EQ(host_->used_bytes(), kBlock);  // ...but its slot is still held
  host_->Unpin(a);
  EXPECT_EQ(host_->removed_pinned(), 1u);
  host_->Unpin(a);
  EXPECT_EQ(host_->removed_pinned(), 0u);
  EXPECT_EQ(host_->used_bytes(), 0u);
}

TEST_F(HostTierTest, DropSubtreeRemovesChildrenFirstAndCountsThem) {
  Store("a");
  Store("b", "a");
  host_->DropSubtree(index_.Find(ns_, Key("a")));
  EXPECT_EQ(index_.size(), 0u);
  EXPECT_EQ(counters_.dropped_descendants, 1u);
  EXPECT_EQ(host_->used_bytes(), 0u);
  EXPECT_EQ(namespaces_.FindAny(ns_)->blocks, 0u);  // open: kept while empty
}

}  // namespace
}  // namespace kvtier
