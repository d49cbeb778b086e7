#include "costmodel/kv_footprint.h"

#include <cmath>

#include "costmodel/test_models.h"
#include "gtest/gtest.h"

namespace kvtier::costmodel {
namespace {

TEST(KvFootprintTest, GqaBytesPerTokenAndTpSharding) {
  // 2 (K, V) * 32 layers * 8 KV heads * 128 dims * 2 bytes = 131,072.
  KvFootprint f = ComputeKvFootprint(Catalog("llama-3.1-8b", "h100-sxm", 1));
  EXPECT_EQ(f.bytes_per_token, 131072);
  EXPECT_EQ(f.bytes_per_token_per_gpu, 131072);
  EXPECT_EQ(f.bytes_per_block_per_gpu, 131072 * 16);
  EXPECT_EQ(f.replication, 1);
  f = ComputeKvFootprint(Catalog("llama-3.1-8b", "h100-sxm", 2));
  EXPECT_EQ(f.kv_heads_per_gpu, 4);
  EXPECT_EQ(f.bytes_per_token_per_gpu, 65536);
  EXPECT_EQ(f.duplicate_bytes_per_token, 0);
  EXPECT_TRUE(f.alternative.empty());
}

TEST(KvFootprintTest, TpPastKvHeadsReplicates) {
  // TP 16 over 8 KV heads: each GPU keeps one whole head: 2*32*1*128*2 =
  // 16,384 bytes per token; 16 GPUs hold 262,144 for 131,072 unique bytes.
  const KvFootprint f = ComputeKvFootprint(Catalog("llama-3.1-8b", "h100-sxm", 16));
  EXPECT_EQ(f.kv_heads_per_gpu, 1);
  EXPECT_EQ(f.replication, 2);
  EXPECT_EQ(f.bytes_per_token_per_gpu, 16384);
  EXPECT_EQ(f.duplicate_bytes_per_token, 131072);
  EXPECT_NE(f.alternative.find("TP 8"), std::string::npos) << f.alternative;
}

TEST(KvFootprintTest, TpThatCannotShardIsRejected) {
  Deployment d;
  d.model = *CatalogModel("llama-3.1-8b");
  d.gpu = *CatalogGpu("h100-sxm");
  d.tp = 3;
  EXPECT_EQ(d.Validate().code(), absl::StatusCode::kInvalidArgument);
  d.tp = 2;
  d.mfu = 1.5;
  EXPECT_EQ(d.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvFootprintTest, Fp8HalvesBytes) {
  const KvFootprint f = ComputeKvFootprint(
      Deploy(*CatalogModel("llama-3.1-8b"), *CatalogGpu("h100-sxm"), 1, /*kv_bytes=*/1));
  EXPECT_EQ(f.bytes_per_token, 65536);
}

TEST(KvFootprintTest, MlaLatentDoesNotShrinkWithTp) {
  // (512 + 64) * 2 bytes * 61 layers = 70,272 per token on every rank.
  const Deployment d = Deploy(TestConfig("mla_deepseek.json"), *CatalogGpu("h200"), 8);
  const KvFootprint f = ComputeKvFootprint(d);
  EXPECT_EQ(f.bytes_per_token, 70272);
  EXPECT_EQ(f.bytes_per_token_per_gpu, 70272);
  EXPECT_EQ(f.replication, 8);
  EXPECT_EQ(f.duplicate_bytes_per_token, 70272 * 7);
  EXPECT_NE(f.alternative.find("data-parallel attention"), std::string::npos);
}

TEST(KvFootprintTest, SlidingWindowGroups) {
  // gpt-oss: 2*8*64*2 = 2,048 bytes per layer per token; 18 sliding
  // (window 128) + 18 full layers.
  const Deployment d = Deploy(TestConfig("sliding_gptoss.json"), *CatalogGpu("h100-sxm"));
  const KvFootprint f = ComputeKvFootprint(d);
  EXPECT_EQ(f.bytes_per_token, 73728);
  ASSERT_EQ(f.groups.size(), 2u);
  EXPECT_EQ(f.groups[0].bytes_per_token_per_gpu, 36864);
  EXPECT_EQ(KvBytesPerGpuAtContext(d, 131072), 36864.0 * 131072 + 36864.0 * 128);
  // f * (1 - w / n) = 0.5 * (1 - 128 / 131072).
  EXPECT_DOUBLE_EQ(SlidingWindowSaving(d, 131072), 0.49951171875);
  EXPECT_EQ(SlidingWindowSaving(d, 100), 0);  // inside the window nothing is saved
  // Longest request for a budget of 36864 * (10000 + 128) bytes: 10,000.
  EXPECT_EQ(LongestRequestTokens(d, 36864.0 * 10128), 10000);
}

TEST(KvFootprintTest, AllSlidingModelIsUnboundedAndTinyBudgetFitsNothing) {
  ModelSpec m = ToyModel();
  m.groups = {{LayerKind::kSlidingWindow, 2, 64}};
  const Deployment d = Deploy(m, ToyGpu());
  EXPECT_TRUE(std::isinf(LongestRequestTokens(d, 1e9)));
  EXPECT_EQ(LongestRequestTokens(Deploy(ToyModel(), ToyGpu()), 10), 0);
}

TEST(KvFootprintTest, LongestRequestRoundsToBlocks) {
  const Deployment d = Catalog("llama-3.1-8b", "h100-sxm");
  EXPECT_EQ(LongestRequestTokens(d, 131072.0 * 1000 + 5), 992);  // 1000 fit, 62 whole blocks
}

TEST(KvFootprintTest, RecurrentStateInventory) {
  // SSM: 32 heads * 64 dims * 128 state * 2 bytes = 524,288 per layer;
  // conv: (4 - 1) * (2048 + 2 * 1 * 128) * 2 = 13,824; 6 recurrent layers.
  const Deployment d = Deploy(TestConfig("recurrent_hybrid.json"), *CatalogGpu("h100-sxm"), 2);
  const KvFootprint f = ComputeKvFootprint(d);
  EXPECT_EQ(f.recurrent_state_bytes_per_request, 6.0 * (524288 + 13824));
  EXPECT_EQ(f.recurrent_state_bytes_per_request_per_gpu, 3.0 * (524288 + 13824));
  // KV: 2 attention layers * 2 * 2 heads * 128 * 2 bytes = 2,048 per token.
  EXPECT_EQ(f.bytes_per_token, 2048);
  StatePlan s = PlanState(d, 256, 4096);
  EXPECT_EQ(s.ssm_state_bytes_per_layer, 524288);
  EXPECT_EQ(s.conv_state_bytes_per_layer, 13824);
  EXPECT_EQ(s.restart_boundary_tokens, 256u);
  EXPECT_EQ(s.checkpoints_at_context, 16);
  EXPECT_EQ(s.checkpoint_bytes_at_context, 16 * 6.0 * (524288 + 13824));
  EXPECT_EQ(PlanState(d, 100, 0).restart_boundary_tokens, 400u);  // lcm(16, 100)
  // Without recurrent layers any block boundary restores.
  EXPECT_EQ(PlanState(Catalog("llama-3.1-8b", "h100-sxm"), 100, 0).restart_boundary_tokens, 16u);
}

TEST(KvFootprintTest, ModelWithoutAttentionLayersHasNoKvToShard) {
  ModelSpec m = TestConfig("recurrent_hybrid.json");
  m.groups = {{LayerKind::kRecurrent, 8, 0}};
  const KvFootprint f = ComputeKvFootprint(Deploy(m, *CatalogGpu("h100-sxm"), 8));
  EXPECT_EQ(f.bytes_per_token, 0);
  EXPECT_EQ(f.replication, 1);
  EXPECT_TRUE(f.alternative.empty());
  EXPECT_GT(f.recurrent_state_bytes_per_request, 0);
  // Zero KV heads is a config error, not a division by zero later.
  m.num_kv_heads = 0;
  EXPECT_EQ(m.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvFootprintTest, LongestRequestTerminatesForHugeBudgets) {
  const double n = LongestRequestTokens(Catalog("llama-3.1-8b", "h100-sxm"), 3e23);
  EXPECT_TRUE(std::isfinite(n));
  EXPECT_GT(n, 1e15);
  EXPECT_EQ(std::fmod(n, 16), 0);
}

TEST(KvFootprintTest, BlockSizeWaste) {
  const BlockSizeReport r = BlockSize(Catalog("llama-3.1-8b", "h100-sxm"), 1000);
  EXPECT_EQ(r.max_waste_tokens_per_sequence, 15);
  EXPECT_DOUBLE_EQ(r.max_waste_fraction, 0.015);
  EXPECT_EQ(r.blocks_per_sequence, 63);
  EXPECT_EQ(r.prefix_match_granularity_tokens, 16);
}

}  // namespace
}  // namespace kvtier::costmodel
