// Hand-derived checks of the planner questions that have no file of their
// own test: tier value and SSD wear (9), P/D links (14), preemption (7),
// MLA roofline (13), FP8 (3) and K/V quantization layouts (15).
#include <cmath>

#include "costmodel/attention_roofline.h"
#include "costmodel/fetch_plan.h"
#include "costmodel/kv_footprint.h"
#include "costmodel/kv_quant.h"
#include "costmodel/memory_budget.h"
#include "costmodel/pd_link.h"
#include "costmodel/preemption.h"
#include "costmodel/test_models.h"
#include "costmodel/tier_value.h"
#include "gtest/gtest.h"

namespace kvtier::costmodel {
namespace {

TEST(TierValueTest, NvmeIsNotWorthItForA1bModel) {
  // Llama-3.2-1B: prefill parameters 1,235,814,400 - 262,668,288 (head) =
  // 973,146,112; attention 2 * 32 * 128 = 8192 FLOPs per pair per layer, 16
  // layers, mean context 2048 over a 4096-token prefix; 32,768 KV bytes per
  // token. H100 at MFU 0.5: 4.947e14 FLOP/s.
  const Deployment d = Catalog("llama-3.2-1b", "h100-sxm");
  const double recompute = (2 * 973146112.0 + 8192.0 * 16 * 2048) / (989.4e12 * 0.5);
  const TierValue nvme = EvaluateTier(d, TierLink{"nvme", 6.9e9, 90e-6}, 4096);
  EXPECT_NEAR(nvme.recompute_seconds_per_token, recompute, 1e-15);
  EXPECT_DOUBLE_EQ(nvme.fetch_seconds_per_token, 32768 / 6.9e9 + 90e-6 / 4096);
  EXPECT_LT(nvme.value_seconds_per_token, 0);
  EXPECT_FALSE(nvme.worthwhile);
  EXPECT_TRUE(EvaluateTier(d, TierLink{"host", 63e9, 5e-6}, 4096).worthwhile);
  // A 70B model recomputes ~10x slower per KV byte: the same NVMe pays off.
  EXPECT_TRUE(
      EvaluateTier(Catalog("llama-3.1-70b", "h100-sxm"), TierLink{"nvme", 6.9e9, 90e-6}, 4096)
          .worthwhile);
}

TEST(TierValueTest, SsdWearByHand) {
  const SsdSpec ssd = *CatalogSsd("samsung-pm9a3-3.84tb");
  SsdWear w = EvaluateSsdWear(ssd, 100e6);
  EXPECT_DOUBLE_EQ(w.tbw_bytes, 3.84e12 * 1 * 365 * 5);
  EXPECT_DOUBLE_EQ(w.sustainable_write_bytes_per_s, 3.84e12 / 86400);
  EXPECT_DOUBLE_EQ(w.days_to_wear_out, 3.84e12 * 365 * 5 / (100e6 * 86400));
  w = EvaluateSsdWear(ssd, 0);  // at the sustainable rate it lasts the warranty
  EXPECT_NEAR(w.days_to_wear_out, 365 * 5, 1e-9);
}

TEST(PdLinkTest, RequiredBandwidthByHand) {
  // Toy: 32 KV bytes per token; 10 prompt tokens take 27,040 FLOPs / 5e11.
  const Deployment d = Deploy(ToyModel(), ToyGpu());
  const PdPlan p = PlanPd(d, 10, {LinkSpec{"slow", 1e9, 0, ""}, LinkSpec{"fast", 1e10, 0, ""}});
  EXPECT_DOUBLE_EQ(p.prefill_seconds_per_token, 27040 / 5e11 / 10);
  EXPECT_DOUBLE_EQ(p.required_link_bytes_per_s_per_gpu, 32 / (27040 / 5e11 / 10));
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_FALSE(p.links[0].sufficient);  // 1e9 < 5.92e9
  EXPECT_TRUE(p.links[1].sufficient);
  EXPECT_EQ(p.transfer_bytes_per_gpu, 320);
}

TEST(PdLinkTest, SmallModelOnFastGpuBreaksA100gNic) {
  // Llama-3.2-1B on a B200: 32,768 KV bytes per token; prefill of 4096
  // tokens costs (2 * 973,146,112 + 8192 * 16 * 2048) FLOPs per token at
  // 2.25e15 * 0.5 FLOP/s: ~16.6 GB/s per GPU, above 100 Gb/s (12.5 GB/s),
  // below 200 Gb/s (25 GB/s).
  const PdPlan p = PlanPd(Catalog("llama-3.2-1b", "b200"), 4096, CatalogLinks());
  const double per_token = (2 * 973146112.0 + 8192.0 * 16 * 2048) / (2.25e15 * 0.5);
  EXPECT_NEAR(p.required_link_bytes_per_s_per_gpu, 32768 / per_token, 1e3);
  int checked = 0;
  for (const LinkVerdict& v : p.links) {
    if (v.link.name == "nic-100g") {
      EXPECT_FALSE(v.sufficient);
      ++checked;
    }
    if (v.link.name == "nic-200g") {
      EXPECT_TRUE(v.sufficient);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
}

TEST(PreemptionTest, ByHand) {
  const Deployment d = Deploy(ToyModel(), ToyGpu());
  PreemptOptions o;
  o.victim_tokens = 10;
  const PreemptPlan p = PlanPreemption(d, o);
  EXPECT_DOUBLE_EQ(p.recompute_seconds, 27040 / 5e11);
  EXPECT_EQ(p.victim_bytes_per_gpu, 320);  // 10 tokens * 32 bytes
  EXPECT_DOUBLE_EQ(p.swap_out_seconds, 5e-6 + 320 / 1e10);
  EXPECT_DOUBLE_EQ(p.swap_in_seconds, p.swap_out_seconds);
  // Decode step: 1272 params * 2 bytes / 1e12 B/s; 256 steps left.
  EXPECT_DOUBLE_EQ(p.decode_step_seconds, 2544 / 1e12);
  EXPECT_DOUBLE_EQ(p.wait_seconds, 256 * 2544 / 1e12);
  ASSERT_EQ(p.policies.size(), 3u);
  EXPECT_EQ(p.policies[2].policy, "wait");
  EXPECT_EQ(p.policies[2].victim_delay_seconds, 0);
  EXPECT_EQ(p.policies[2].arrivals_delay_seconds, p.wait_seconds);
}

TEST(RooflineTest, AbsorbedMlaIsComputeBoundOnH200) {
  const Deployment d = Deploy(TestConfig("mla_deepseek.json"), *CatalogGpu("h200"), 8);
  const AttentionRoofline r = ComputeAttentionRoofline(d);
  EXPECT_EQ(r.attention, "mla-absorbed");
  EXPECT_EQ(r.flops_per_cached_token, 128 * (2 * 576 + 2 * 512));
  EXPECT_EQ(r.bytes_per_cached_token, 576 * 2);
  EXPECT_DOUBLE_EQ(r.arithmetic_intensity, 278528 / 1152.0);
  EXPECT_DOUBLE_EQ(r.ridge_point, 989.4e12 / 4.8e12);
  EXPECT_EQ(r.regime, "compute-bound");
  EXPECT_DOUBLE_EQ(r.gqa_arithmetic_intensity, 1);  // per-head K and V: 2 FLOPs / 2 bytes
}

TEST(RooflineTest, GqaDecodeIsMemoryBound) {
  const AttentionRoofline r = ComputeAttentionRoofline(Catalog("llama-3.1-8b", "h100-sxm"));
  EXPECT_EQ(r.attention, "gqa");
  EXPECT_DOUBLE_EQ(r.arithmetic_intensity, 2.0 * 4 / 2);  // 2 * g / b, g = 32 / 8
  EXPECT_EQ(r.regime, "memory-bound");
}

TEST(KvQuantTest, Fp8SavingAndClipRate) {
  const Deployment d = Catalog("llama-3.1-8b", "h100-sxm");
  const std::vector<double> amax = {1, 2, 500, 1000};
  absl::StatusOr<Fp8Report> r = EvaluateFp8(d, "e4m3", 2, amax);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes_per_token_bf16, 131072);
  EXPECT_EQ(r->bytes_per_token_fp8, 65536);
  EXPECT_EQ(r->bytes_saved_per_token, 65536);
  EXPECT_EQ(r->saturation_threshold, 896);
  EXPECT_DOUBLE_EQ(r->clip_rate, 0.25);  // only 1000 > 448 * 2
  EXPECT_EQ(EvaluateFp8(d, "e5m2", 2, amax)->clip_rate, 0);
  EXPECT_FALSE(EvaluateFp8(d, "e3m4", 2, amax).ok());
  EXPECT_FALSE(EvaluateFp8(d, "e4m3", 0, amax).ok());
}

TEST(KvQuantTest, KiviStyleLayoutByHand) {
  // Llama-3.1-8B, 4 bits, K per channel and V per token, group 128, fp16
  // scale and zero point: data 2 * 32,768 channels * 0.5 bytes = 32,768; K
  // scales 32,768 * 4 / 128 = 1,024; V: 32 * 8 heads * 1 group * 4 = 1,024.
  QuantLayout q;
  absl::StatusOr<QuantReport> r = EvaluateQuantLayout(Catalog("llama-3.1-8b", "h100-sxm"), q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data_bytes_per_token, 32768);
  EXPECT_EQ(r->scale_bytes_per_token, 2048);
  EXPECT_EQ(r->bytes_per_token, 34816);
  EXPECT_DOUBLE_EQ(r->compression, 131072 / 34816.0);
  EXPECT_EQ(r->residual_tokens, 127u);
  EXPECT_EQ(r->residual_bytes, 127.0 * 65536);  // K only: half of the unquantized bytes
  // Both per token: no residual; scales 2 * 256 heads * 4 bytes.
  q.k_per_channel = false;
  r = EvaluateQuantLayout(Catalog("llama-3.1-8b", "h100-sxm"), q);
  EXPECT_EQ(r->residual_tokens, 0u);
  EXPECT_EQ(r->scale_bytes_per_token, 2048);
  q.group = 32;  // 4 groups per 128-dim head
  r = EvaluateQuantLayout(Catalog("llama-3.1-8b", "h100-sxm"), q);
  EXPECT_EQ(r->scale_bytes_per_token, 2 * 256 * 4 * 4.0);
}

TEST(KvQuantTest, BadLayouts) {
  QuantLayout q;
  EXPECT_FALSE(
      EvaluateQuantLayout(Deploy(TestConfig("mla_deepseek.json"), *CatalogGpu("h200")), q).ok());
  q.bits = 0;
  EXPECT_FALSE(EvaluateQuantLayout(Catalog("llama-3.1-8b", "h100-sxm"), q).ok());
  q.bits = 4;
  q.group = 0;
  EXPECT_FALSE(EvaluateQuantLayout(Catalog("llama-3.1-8b", "h100-sxm"), q).ok());
}

// The subcommands' arithmetic on the four shapes given as config files. Each
// expected figure follows from the formulas in docs/planner.md, worked out
// independently of this code (parameters term by term, then FLOPs):
//  gpt-oss (sliding hybrid): total 116,789,048,640; prefill 4,552,176,960;
//    attention 2 * 64 * (64 + 64) = 16,384 FLOPs per pair, 18 full layers,
//    18 with window 128; 73,728 KV bytes per token.
//  recurrent hybrid: total 178,277,952 (tied); prefill 145,509,952; 4,096
//    FLOPs per pair in its 2 attention layers; 2,048 KV bytes per token.
//  DeepSeek-V3 (MLA): total 671,026,404,352; prefill 35,698,924,544; 81,920
//    FLOPs per pair (128 heads x (192 + 128) x 2), 61 layers; 70,272 bytes.
constexpr double kRel = 1e-9;

TEST(ConfigModelsTest, ParameterCounts) {
  EXPECT_DOUBLE_EQ(TestConfig("sliding_gptoss.json").Parameters().total, 116789048640.0);
  EXPECT_DOUBLE_EQ(TestConfig("sliding_gptoss.json").Parameters().prefill, 4552176960.0);
  EXPECT_DOUBLE_EQ(TestConfig("recurrent_hybrid.json").Parameters().total, 178277952.0);
  EXPECT_DOUBLE_EQ(TestConfig("recurrent_hybrid.json").Parameters().prefill, 145509952.0);
  EXPECT_DOUBLE_EQ(TestConfig("mla_deepseek.json").Parameters().total, 671026404352.0);
  EXPECT_DOUBLE_EQ(TestConfig("mla_deepseek.json").Parameters().prefill, 35698924544.0);
}

TEST(ConfigModelsTest, PdFetchPreemptAndTiersOnConfigModels) {
  struct Case {
    const char* file;
    const char* gpu;
    uint32_t tp;
    double recompute_4096;  // seconds
    double kv_per_token_per_gpu;
  };
  const Case cases[] = {
      {"sliding_gptoss.json", "h100-sxm", 1, 0.08069039361707701, 73728},
      {"recurrent_hybrid.json", "h100-sxm", 1, 0.0025484879796240146, 2048},
      {"mla_deepseek.json", "h200", 8, 0.08448667643860117, 70272},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const Deployment d = Deploy(TestConfig(c.file), *CatalogGpu(c.gpu), c.tp);
    EXPECT_NEAR(RecomputeSeconds(d, 0, 4096), c.recompute_4096, c.recompute_4096 * kRel);
    // Q14: bytes per token over prefill seconds per token.
    const PdPlan pd = PlanPd(d, 4096, CatalogLinks());
    const double required = c.kv_per_token_per_gpu / (c.recompute_4096 / 4096);
    EXPECT_NEAR(pd.required_link_bytes_per_s_per_gpu, required, required * kRel);
    // Q4: break-even for 4096 tokens with 20 us of latency.
    const TierLink tier{"t", 1, 20e-6};
    const double breakeven = 4096 * c.kv_per_token_per_gpu / (c.recompute_4096 - 20e-6);
    EXPECT_NEAR(BreakevenBandwidth(d, tier, 4096), breakeven, breakeven * kRel);
    // Q9: value per token from a 2 GB/s tier.
    const TierValue v = EvaluateTier(d, TierLink{"nvme", 2e9, 100e-6}, 4096);
    const double value = c.recompute_4096 / 4096 - (c.kv_per_token_per_gpu / 2e9 + 100e-6 / 4096);
    EXPECT_NEAR(v.value_seconds_per_token, value, std::fabs(value) * 1e-6);
    // Q7: swapping 4096 tokens over the GPU's 64 GB/s host link.
    PreemptOptions o;
    o.victim_tokens = 4096;
    const PreemptPlan pp = PlanPreemption(d, o);
    EXPECT_NEAR(pp.recompute_seconds, c.recompute_4096, c.recompute_4096 * kRel);
    EXPECT_DOUBLE_EQ(pp.swap_out_seconds, 5e-6 + KvBytesPerGpuAtContext(d, 4096) / 64e9);
  }
  // gpt-oss at 8192 tokens: sliding layers hold 128 tokens, so the victim is
  // 36,864 * (8192 + 128) bytes.
  PreemptOptions o;
  o.victim_tokens = 8192;
  const PreemptPlan pp =
      PlanPreemption(Deploy(TestConfig("sliding_gptoss.json"), *CatalogGpu("h100-sxm")), o);
  EXPECT_DOUBLE_EQ(pp.swap_out_seconds, 5e-6 + 36864.0 * (8192 + 128) / 64e9);
  EXPECT_NEAR(pp.recompute_seconds, 0.17138729268007277, 0.17138729268007277 * kRel);
}

TEST(ConfigModelsTest, BudgetWeightsFollowTheConfigDtype) {
  // The DeepSeek config says fp8 in quantization_config: 1 byte per weight.
  const MemoryBudget b =
      PlanMemoryBudget(Deploy(TestConfig("mla_deepseek.json"), *CatalogGpu("h200"), 8), {});
  ASSERT_EQ(b.items[0].name, "weights");
  EXPECT_DOUBLE_EQ(b.items[0].bytes, 671026404352.0 / 8);
  // gpt-oss's config says bfloat16 (no quantization_config here): 2 bytes.
  const MemoryBudget g =
      PlanMemoryBudget(Deploy(TestConfig("sliding_gptoss.json"), *CatalogGpu("h100-sxm")), {});
  EXPECT_DOUBLE_EQ(g.items[0].bytes, 116789048640.0 * 2);
  EXPECT_GT(g.shortfall_bytes, 0);  // 234 GB of bf16 weights do not fit one H100
}

}  // namespace
}  // namespace kvtier::costmodel
