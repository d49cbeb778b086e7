#include "costmodel/block_sharing.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace kvtier::costmodel {
namespace {

std::string ReadTestFile(const std::string& name) {
  std::ifstream in(std::string(KVTIER_TESTDATA) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(BlockSharingTest, TokenPromptsByHand) {
  // Blocks of 4: [1234] is shared by three prompts, [1234][5678] by two;
  // [0123][4567] differs from the first token, so it shares nothing. Two
  // prompts end in a partial block.
  absl::StatusOr<PromptSet> set = ParsePrompts(ReadTestFile("prompts_tokens.jsonl"), 4);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->node_count, 5u);
  SharingReport r = AnalyzeSharing(*set, 1);
  EXPECT_EQ(r.prompts, 4u);
  EXPECT_EQ(r.blocks_without_sharing, 10u);  // 3 + 3 + 2 + 2
  EXPECT_EQ(r.blocks_with_sharing, 7u);      // 5 prefixes + 2 partial blocks
  EXPECT_DOUBLE_EQ(r.saving_fraction, 0.3);
  EXPECT_EQ(r.cow_copies, 0u);
  // Two samples per prompt: each partial block is copied once on append.
  r = AnalyzeSharing(*set, 2);
  EXPECT_EQ(r.blocks_without_sharing, 20u);
  EXPECT_EQ(r.cow_copies, 2u);
  EXPECT_EQ(r.blocks_with_sharing, 9u);
  EXPECT_DOUBLE_EQ(r.saving_fraction, 0.55);
}

TEST(BlockSharingTest, MooncakeHashIdsByHand) {
  // 512-token blocks: (0), (0,1) shared by two prompts, (0,4), (5); three
  // prompts end in a partial block.
  absl::StatusOr<PromptSet> set = ParsePrompts(ReadTestFile("prompts_trace.jsonl"), 16);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->from_trace_hash_ids);
  EXPECT_EQ(set->block_tokens, 512u);
  const SharingReport r = AnalyzeSharing(*set, 1);
  EXPECT_EQ(r.blocks_without_sharing, 10u);
  EXPECT_EQ(r.blocks_with_sharing, 7u);
  EXPECT_EQ(r.partial_blocks, 3u);
}

TEST(BlockSharingTest, BadPromptFilesNameTheLine) {
  auto err = [](const std::string& text) {
    absl::StatusOr<PromptSet> s = ParsePrompts(text, 4);
    EXPECT_FALSE(s.ok()) << text;
    return std::string(s.status().message());
  };
  EXPECT_NE(err("[1,2]\n{oops").find("line 2"), std::string::npos);
  EXPECT_NE(err("[1, \"a\"]").find("non-integer"), std::string::npos);
  EXPECT_NE(err(R"({"hash_ids": [1]})").find("input_length"), std::string::npos);
  EXPECT_NE(err(R"({"input_length": 2000, "hash_ids": [1]})").find("do not cover"),
            std::string::npos);
  EXPECT_NE(err("[1,2]\n"
                R"({"input_length": 10, "hash_ids": [1]})")
                .find("mix"),
            std::string::npos);
  EXPECT_NE(err("\n\n").find("no prompts"), std::string::npos);
}

TEST(StrandingTest, LruStrandsLeafFirstDoesNot) {
  // Blocks of 1 token: prompt 1 caches A -> B, prompt 2 caches C. With room
  // for 2, plain LRU evicts A (the coldest) and strands B; leaf-first may
  // only evict the leaf B.
  absl::StatusOr<PromptSet> set = ParsePrompts("[1, 2]\n[3]\n", 1);
  ASSERT_TRUE(set.ok());
  const EvictionReport lru = SimulateEviction(*set, 2, false);
  const EvictionReport leaf = SimulateEviction(*set, 2, true);
  EXPECT_EQ(lru.evictions, 1u);
  EXPECT_EQ(lru.stranded_blocks_final, 1u);
  EXPECT_EQ(leaf.evictions, 1u);
  EXPECT_EQ(leaf.stranded_blocks_final, 0u);
}

TEST(StrandingTest, PromptLongerThanTheCacheStrandsOnlyUnderLru) {
  // [1,2,3,4] with room for 2: LRU evicts the chain's head as it goes and
  // ends with 3 -> 4 cached under an evicted 2 (both stranded); leaf-first
  // keeps 1 -> 2 and does not cache blocks whose parent it had to drop.
  absl::StatusOr<PromptSet> set = ParsePrompts("[1, 2, 3, 4]\n", 1);
  ASSERT_TRUE(set.ok());
  const EvictionReport lru = SimulateEviction(*set, 2, false);
  const EvictionReport leaf = SimulateEviction(*set, 2, true);
  EXPECT_EQ(lru.stranded_blocks_final, 2u);
  EXPECT_EQ(leaf.stranded_blocks_final, 0u);
  EXPECT_EQ(leaf.stranded_blocks_peak, 0u);
  // Longer prompts and a shared prefix: leaf-first never strands.
  set = ParsePrompts("[1,2,3,4,5,6]\n[7]\n[1,2,3,8]\n[1,2,9,9,9]\n", 1);
  ASSERT_TRUE(set.ok());
  for (uint64_t cap : {1, 2, 3, 5}) {
    EXPECT_EQ(SimulateEviction(*set, cap, true).stranded_blocks_peak, 0u) << cap;
  }
}

TEST(StrandingTest, LeafFirstKeepsThePrefixThatHits) {
  // Then prompt 1 again: leaf-first still has A and hits it; LRU lost A.
  absl::StatusOr<PromptSet> set = ParsePrompts("[1, 2]\n[3]\n[1, 2]\n", 1);
  ASSERT_TRUE(set.ok());
  const EvictionReport lru = SimulateEviction(*set, 2, false);
  const EvictionReport leaf = SimulateEviction(*set, 2, true);
  EXPECT_EQ(lru.lookups, 5u);
  EXPECT_EQ(lru.hits, 0u);
  EXPECT_EQ(leaf.hits, 1u);
  EXPECT_EQ(lru.stranded_blocks_peak, 1u);
  EXPECT_EQ(leaf.stranded_blocks_peak, 0u);
}

}  // namespace
}  // namespace kvtier::costmodel
