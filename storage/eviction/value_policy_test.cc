#include "storage/eviction/value_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "storage/eviction/leaf_lru_policy.h"
#include "storage/prefix_index.h"

namespace kvtier {
namespace {

BlockRecord Block(const std::string& key, uint32_t uses, uint8_t retention = kDefaultRetention,
                  float value = 0) {
  BlockRecord r;
  NamespaceSpec s;
  s.model_id = "m";
  s.layout = KvLayout{1, 1, 64, DType::kBf16, 16, 0, 1};
  r.ns = NamespaceId::Of(s);
  r.key = *BlockKey::Create(key);
  r.uses = uses;
  r.retention = retention;
  r.value = value;
  return r;
}

TEST(ValuePolicyTest, PriorityIsInflationPlusValueTimesReuseTimesRetention) {
  ValuePolicy policy;
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1)), 1.0) << "no value known: 1 per byte";
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 2)), ValuePolicy::kReuseWeight);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1, kDefaultRetention, 0.5f)), 0.5);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 3, kDefaultRetention, 0.5f)), 2.0);
  // Retention: 2^((p - 35) / 13), and 0 for p = 0.
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1, 48)), 2.0);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1, 22)), 0.5);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1, 100)), std::exp2(65.0 / 13.0));
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1, 200)), std::exp2(65.0 / 13.0)) << "capped";
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 5, 0)), 0.0);

  // Reclaiming raises the clock (the inflation) to the reclaimed priority,
  // never lowers it; a priority counts from the clock at the block's last use.
  policy.OnReclaim(Block("a", 1), 3.0, /*dropped=*/false, 10);
  EXPECT_DOUBLE_EQ(policy.clock(), 3.0);
  policy.OnReclaim(Block("b", 1), 2.0, /*dropped=*/false, 10);
  EXPECT_DOUBLE_EQ(policy.clock(), 3.0);
  BlockRecord used_now = Block("c", 1);
  used_now.clock_at_use = policy.clock();
  EXPECT_DOUBLE_EQ(policy.Priority(used_now), 4.0);
  used_now.uses = 2;
  used_now.value = 0.25f;
  EXPECT_DOUBLE_EQ(policy.Priority(used_now), 4.0);
  used_now.retention = 0;
  EXPECT_DOUBLE_EQ(policy.Priority(used_now), 3.0) << "retention 0 goes first";
  EXPECT_DOUBLE_EQ(policy.Priority(Block("d", 1)), 1.0) << "last used at clock 0";
}

TEST(ValuePolicyTest, ValuesCountRelativeToTheDefaultWhichUnpricedBlocksTake) {
  ValuePolicy policy;
  policy.SetDefaultValue(0.125);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1)), 1.0);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1, kDefaultRetention, 2.0f)), 16.0);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1, kDefaultRetention, 0.0625f)), 0.5);
  policy.SetDefaultValue(0);
  EXPECT_DOUBLE_EQ(policy.Priority(Block("a", 1)), 1.0);
}

TEST(ValuePolicyTest, APutOfAnEvictedBlockCountsAsItsSecondUse) {
  ValuePolicy policy;
  BlockRecord evicted = Block("gone", 1);
  policy.OnReclaim(evicted, 1.0, /*dropped=*/true, 10);
  BlockRecord again = Block("gone", 1);
  policy.OnInsert(&again);
  EXPECT_EQ(again.uses, 2u);
  EXPECT_EQ(policy.history_hits(), 1u);
  // A host copy dropped (the block stays on NVMe) is not an eviction.
  policy.OnReclaim(Block("copy", 1), 1.0, /*dropped=*/false, 10);
  BlockRecord copy = Block("copy", 1);
  policy.OnInsert(&copy);
  EXPECT_EQ(copy.uses, 1u);
  BlockRecord fresh = Block("new", 1);
  policy.OnInsert(&fresh);
  EXPECT_EQ(fresh.uses, 1u);
  EXPECT_GT(policy.memory_bytes(), 0u);
}

TEST(EvictionPolicyTest, ByName) {
  EXPECT_EQ((*EvictionPolicyByName("value"))->name(), "value");
  EXPECT_EQ((*EvictionPolicyByName("lru"))->name(), "lru");
  absl::StatusOr<std::unique_ptr<EvictionPolicy>> bad = EvictionPolicyByName("lfu");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"value\" or \"lru\""), std::string::npos);
}

// Through the index: the value policy keeps a block used twice past blocks
// used once and reclaimed after it; LRU does not.
TEST(EvictionPolicyTest, TheIndexOrdersCandidatesByPolicyPriority) {
  for (const char* name : {"value", "lru"}) {
    std::unique_ptr<EvictionPolicy> policy = *EvictionPolicyByName(name);
    PrefixIndex index(policy.get());
    auto add = [&](const std::string& key, uint32_t uses) {
      auto r = std::make_unique<BlockRecord>(Block(key, uses));
      ASSERT_TRUE(index.Insert(std::move(r)).ok());
    };
    add("hot", 2);
    add("cold1", 1);
    add("cold2", 1);
    std::vector<std::string> order;
    while (BlockRecord* victim = index.ColdestEvictable(std::nullopt)) {
      order.emplace_back(victim->key.bytes());
      index.NoteReclaimed(victim, /*dropped=*/true);
      index.Remove(victim);
    }
    if (std::string(name) == "value") {
      EXPECT_EQ(order, (std::vector<std::string>{"cold1", "cold2", "hot"}));
    } else {
      EXPECT_EQ(order, (std::vector<std::string>{"hot", "cold1", "cold2"}));
    }
  }
}

// A tier may reclaim a block that is not the lowest of its set (the coldest
// of one size class): the clock rises only to the set's lowest priority, so
// one such reclaim of a block kept at retention 100 does not lift the clock
// past every block.
TEST(EvictionPolicyTest, TheClockRisesOnlyToTheLowestPriorityOfTheVictimsSets) {
  ValuePolicy policy;
  PrefixIndex index(&policy);
  auto kept = std::make_unique<BlockRecord>(Block("kept", 1, 100));
  kept->slot.size_class = 1;
  BlockRecord* k = kept.get();
  ASSERT_TRUE(index.Insert(std::move(kept)).ok());
  ASSERT_TRUE(index.Insert(std::make_unique<BlockRecord>(Block("plain", 1))).ok());
  ASSERT_EQ(index.Coldest(PrefixIndex::kHostOnlyLeaf, 1), k);  // the only one of class 1
  index.NoteReclaimed(k, /*dropped=*/true);
  index.Remove(k);
  EXPECT_DOUBLE_EQ(policy.clock(), 1.0) << "plain's priority, not kept's 32";
}

}  // namespace
}  // namespace kvtier
