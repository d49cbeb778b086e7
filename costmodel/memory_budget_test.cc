#include "costmodel/memory_budget.h"

#include <cmath>

#include "costmodel/test_models.h"
#include "gtest/gtest.h"

namespace kvtier::costmodel {
namespace {

constexpr double kMiB = 1024.0 * 1024;

TEST(MemoryBudgetTest, Llama8bOnH100ByHand) {
  BudgetOptions o;
  o.weights_bytes_per_gpu = 16e9;
  o.activation_bytes = 1e9;
  o.cudagraph_bytes = 0.5e9;
  const MemoryBudget b = PlanMemoryBudget(Catalog("llama-3.1-8b", "h100-sxm"), o);
  // 0.9 * 81559 MiB (the H100's nvidia-smi total).
  const double mem = 81559.0 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(b.usable_bytes, 0.9 * mem);
  // weights + activations + graphs + context 600 MiB + cuBLAS 64 MiB +
  // sampler 256 * 128256 * 4 * 2 + fragmentation 2% of memory; no NCCL at TP 1.
  const double reserved = 16e9 + 1e9 + 0.5e9 + 600 * kMiB + 64 * kMiB + 262668288.0 + 0.02 * mem;
  EXPECT_DOUBLE_EQ(b.kv_budget_bytes_per_gpu, 0.9 * mem - reserved);
  // (0.9 * 85,520,809,984 - 20,169,338,952) / 2,097,152 = 27,084.06.
  EXPECT_EQ(b.max_blocks_per_gpu, std::floor((0.9 * mem - reserved) / 2097152));
  EXPECT_EQ(b.max_blocks_per_gpu, 27084);
  EXPECT_EQ(b.max_tokens_per_gpu, 27084 * 16);
  EXPECT_EQ(b.longest_request_tokens, 27084 * 16);
  EXPECT_EQ(b.shortfall_bytes, 0);
  bool measured_weights = false, nccl_not_measured = false;
  for (const BudgetItem& i : b.items) {
    if (i.name == "weights") measured_weights = i.measured_by_engine;
    if (i.name == "nccl_buffers") nccl_not_measured = !i.measured_by_engine;
    if (i.name == "nccl_buffers") {
      EXPECT_EQ(i.bytes, 0);
    }
    EXPECT_FALSE(i.note.empty()) << i.name;
  }
  EXPECT_TRUE(measured_weights);
  EXPECT_TRUE(nccl_not_measured);
}

TEST(MemoryBudgetTest, DefaultEstimates) {
  const MemoryBudget b = PlanMemoryBudget(Catalog("llama-3.1-8b", "h100-sxm", 2), {});
  for (const BudgetItem& i : b.items) {
    // 8,030,261,248 parameters * 2 bytes / TP 2.
    if (i.name == "weights") {
      EXPECT_DOUBLE_EQ(i.bytes, 8030261248.0);
    }
    // 8192 tokens * 2 bytes * (3 * 14336 / 2 + 4 * 4096).
    if (i.name == "activation_peak") {
      EXPECT_DOUBLE_EQ(i.bytes, 8192 * 2.0 * (21504 + 16384));
    }
    if (i.name == "nccl_buffers") {
      EXPECT_DOUBLE_EQ(i.bytes, (256 + 64) * kMiB);
    }
  }
}

TEST(MemoryBudgetTest, ModelThatDoesNotFitReportsShortfall) {
  const MemoryBudget b = PlanMemoryBudget(Catalog("llama-3.1-70b", "l40s"), {});
  EXPECT_GT(b.shortfall_bytes, 90e9);  // 141 GB of weights, 43 GB usable
  EXPECT_EQ(b.kv_budget_bytes_per_gpu, 0);
  EXPECT_EQ(b.max_blocks_per_gpu, 0);
  EXPECT_EQ(b.longest_request_tokens, 0);
  ASSERT_FALSE(b.oom_risks.empty());
  EXPECT_NE(b.oom_risks[0].find("exceed"), std::string::npos);
}

TEST(MemoryBudgetTest, MlaBudgetCountsTheReplicatedLatent) {
  // DeepSeek-V3 on 8 x H200 in FP8: 671 GB / 8 of weights per GPU; the
  // latent is replicated, so per-GPU tokens are the cluster's tokens.
  Deployment d = Deploy(TestConfig("mla_deepseek.json"), *CatalogGpu("h200"), 8);
  d.model.weight_bytes_per_param = 1;
  const MemoryBudget b = PlanMemoryBudget(d, {});
  EXPECT_GT(b.max_tokens_per_gpu, 0);
  // Every rank holds the whole 70,272-byte latent per token: blocks of 16
  // tokens cost 1,124,352 bytes on each GPU whatever the TP.
  EXPECT_EQ(b.max_blocks_per_gpu, std::floor(b.kv_budget_bytes_per_gpu / (70272.0 * 16)));
  EXPECT_EQ(b.longest_request_tokens, b.max_tokens_per_gpu);
}

}  // namespace
}  // namespace kvtier::costmodel
