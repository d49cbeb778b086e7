#include "costmodel/fetch_plan.h"

#include <algorithm>
#include <cmath>

#include "costmodel/kv_footprint.h"
#include "costmodel/test_models.h"
#include "gtest/gtest.h"

namespace kvtier::costmodel {
namespace {

TEST(FetchPlanTest, RecomputeFlopsByHand) {
  // Toy: 2 * 1192 * 10 = 23,840 for the weights; attention 2 * 2 heads *
  // (4 + 4) = 32 FLOPs per (token, context) pair per layer, 2 layers,
  // integral of c over [0, 10) = 50: 3,200.
  EXPECT_DOUBLE_EQ(RecomputeFlops(ToyModel(), 0, 10), 27040);
  // [4, 10): 2 * 1192 * 6 + 32 * 2 * (100 - 16) / 2.
  EXPECT_DOUBLE_EQ(RecomputeFlops(ToyModel(), 4, 10), 14304 + 2688);
  EXPECT_EQ(RecomputeFlops(ToyModel(), 10, 10), 0);
  // TP 1 * 1e12 * 0.5 = 5e11 FLOP/s.
  EXPECT_DOUBLE_EQ(RecomputeSeconds(Deploy(ToyModel(), ToyGpu()), 0, 10), 27040 / 5e11);
}

TEST(FetchPlanTest, SlidingLayersSeeOnlyTheirWindow) {
  ModelSpec m = ToyModel();
  m.groups = {{LayerKind::kSlidingWindow, 2, 4}};
  // Integral of min(4, c) over [0, 10) = 8 + 4 * 6 = 32.
  EXPECT_DOUBLE_EQ(RecomputeFlops(m, 0, 10), 23840 + 32 * 2 * 32);
}

TEST(FetchPlanTest, AsymptoticBreakevenByHand) {
  // 32 bytes/token * 5e11 FLOP/s / (2 * 1192 FLOP/token).
  EXPECT_DOUBLE_EQ(AsymptoticBreakevenBandwidth(Deploy(ToyModel(), ToyGpu())),
                   32 * 5e11 / (2 * 1192.0));
}

// The decision flips exactly at the break-even bandwidth.
TEST(FetchPlanTest, DecisionFlipsAtBreakeven) {
  for (const Deployment& d :
       {Catalog("llama-3.1-8b", "h100-sxm"), Catalog("llama-3.2-1b", "h100-sxm"),
        Deploy(TestConfig("mla_deepseek.json"), *CatalogGpu("h200"), 8)}) {
    SCOPED_TRACE(d.model.name);
    const double tokens = 4096;
    const double bytes = tokens * ComputeKvFootprint(d).bytes_per_token_per_gpu;
    TierLink tier{"t", 0, 50e-6};
    const double breakeven = BreakevenBandwidth(d, tier, tokens);
    ASSERT_TRUE(std::isfinite(breakeven));
    const double recompute = RecomputeSeconds(d, 0, tokens);
    tier.bytes_per_s = breakeven * (1 + 1e-9);
    EXPECT_LT(FetchSeconds(tier, bytes), recompute);
    tier.bytes_per_s = breakeven * (1 - 1e-9);
    EXPECT_GT(FetchSeconds(tier, bytes), recompute);
  }
}

TEST(FetchPlanTest, LatencyAboveRecomputeNeverFetches) {
  const Deployment d = Deploy(ToyModel(), ToyGpu());
  EXPECT_TRUE(std::isinf(BreakevenBandwidth(d, TierLink{"slow", 1e12, 1.0}, 10)));
}

Segment Seg(const char* name, double bw, double latency, uint32_t blocks, double block_bytes) {
  return Segment{TierLink{name, bw, latency}, blocks, blocks * block_bytes};
}

TEST(FetchPlanTest, CutStopsWhereTheSlowTierStarts) {
  // Llama-3.1-8B on an H100: one 16-token block is 2 MiB per GPU and costs
  // ~450 us to recompute. From host at 20 GB/s it costs ~105 us: fetch.
  // From a 1 GB/s NVMe ~2.1 ms: recompute.
  const Deployment d = Catalog("llama-3.1-8b", "h100-sxm");
  const double block = ComputeKvFootprint(d).bytes_per_block_per_gpu;
  std::vector<Segment> segs = {Seg("host", 20e9, 10e-6, 10, block),
                               Seg("nvme", 1e9, 100e-6, 20, block)};
  CutPlan p = PlanCut(d, segs, 30 * 16);
  EXPECT_EQ(p.cut_blocks, 10u);
  EXPECT_DOUBLE_EQ(p.fetch_seconds, 10e-6 + 10 * block / 20e9);
  EXPECT_DOUBLE_EQ(p.recompute_seconds, RecomputeSeconds(d, 160, 480));
  EXPECT_DOUBLE_EQ(p.total_seconds, p.fetch_seconds + p.recompute_seconds);
  EXPECT_DOUBLE_EQ(p.recompute_all_seconds, RecomputeSeconds(d, 0, 480));
  EXPECT_LT(p.total_seconds, p.recompute_all_seconds);
  EXPECT_LT(p.total_seconds, p.fetch_all_seconds);
  // A faster NVMe moves the cut to the end of the match.
  segs[1].tier.bytes_per_s = 20e9;
  p = PlanCut(d, segs, 30 * 16);
  EXPECT_EQ(p.cut_blocks, 30u);
  EXPECT_DOUBLE_EQ(p.fetch_seconds, p.fetch_all_seconds);
  // A slow host as well: recompute everything.
  segs[0].tier.bytes_per_s = segs[1].tier.bytes_per_s = 1e8;
  p = PlanCut(d, segs, 30 * 16);
  EXPECT_EQ(p.cut_blocks, 0u);
  EXPECT_EQ(p.fetch_seconds, 0);
  EXPECT_DOUBLE_EQ(p.recompute_seconds, p.recompute_all_seconds);
}

TEST(FetchPlanTest, RecurrentModelsCutOnlyAtStateCheckpoints) {
  // The hybrid holds 2,048 KV bytes per token (32 KiB per 16-token block) and
  // 3,228,672 bytes of state per request, 1,614,336 per GPU at TP 2.
  const Deployment d = Deploy(TestConfig("recurrent_hybrid.json"), *CatalogGpu("h100-sxm"), 2);
  EXPECT_EQ(CutConstraintsFor(d, 0).step_blocks, 0u);  // no checkpoints: no cut
  const CutConstraints c = CutConstraintsFor(d, 64);   // lcm(16, 64) = 64 tokens = 4 blocks
  EXPECT_EQ(c.step_blocks, 4u);
  EXPECT_EQ(c.state_bytes, 3228672.0 / 2);
  const double block = ComputeKvFootprint(d).bytes_per_block_per_gpu;
  const std::vector<Segment> segs = {Seg("host", 50e9, 0, 10, block)};
  EXPECT_EQ(PlanCut(d, segs, 160, CutConstraintsFor(d, 0)).cut_blocks, 0u);
  // Only cuts 0, 4 and 8 are allowed; each fetch pays for the state at the cut.
  const CutPlan p = PlanCut(d, segs, 160, c);
  const double cost[3] = {RecomputeSeconds(d, 0, 160),
                          (4 * block + c.state_bytes) / 50e9 + RecomputeSeconds(d, 64, 160),
                          (8 * block + c.state_bytes) / 50e9 + RecomputeSeconds(d, 128, 160)};
  const int best = static_cast<int>(std::min_element(cost, cost + 3) - cost);
  EXPECT_EQ(p.cut_blocks, 4u * best);
  EXPECT_NEAR(p.total_seconds, cost[best], 1e-15);
  EXPECT_NEAR(p.fetch_all_seconds, cost[2], 1e-15);
  EXPECT_EQ(p.cut_blocks % 4, 0u);
  // Models without recurrent layers are unconstrained.
  EXPECT_EQ(CutConstraintsFor(Catalog("llama-3.1-8b", "h100-sxm"), 0).step_blocks, 1u);
}

TEST(FetchPlanTest, CutNeverPassesTheTokensCovered) {
  const Deployment d = Catalog("llama-3.1-8b", "h100-sxm");
  const double block = ComputeKvFootprint(d).bytes_per_block_per_gpu;
  const std::vector<Segment> segs = {Seg("host", 50e9, 0, 10, block)};
  EXPECT_EQ(PlanCut(d, segs, 5 * 16 + 3).cut_blocks, 5u);
  EXPECT_EQ(PlanCut(d, segs, 1000).cut_blocks, 10u);
  EXPECT_EQ(PlanCut(d, {}, 1000).cut_blocks, 0u);
}

TEST(FetchPlanTest, AmongCutsEachPricedWithItsOwnBytesPerTier) {
  // gpt-oss-120b at TP 8 (full and 128-token sliding layers): a cut fetches
  // the full-attention prefix and its own window. Cuts 4 (all on the host)
  // and 12 (its last 8 blocks on a slow NVMe), and a snapshot-like extra.
  const Deployment d = Catalog("gpt-oss-120b", "h100-sxm");
  const TierLink tiers[] = {{"host", 20e9, 10e-6}, {"nvme", 1e7, 100e-6}};
  const double block = ComputeKvFootprint(d).bytes_per_block_per_gpu;
  std::vector<CutOption> options = {{4, {4 * block + 1e5, 0}}, {12, {4 * block, 8 * block + 1e5}}};
  const double tokens = 16 * 16;
  CutPlan p = PlanAmongCuts(d, tiers, options, tokens);
  const double at4 = FetchSeconds(tiers[0], 4 * block + 1e5) + RecomputeSeconds(d, 64, tokens);
  const double at12 = FetchSeconds(tiers[0], 4 * block) + FetchSeconds(tiers[1], 8 * block + 1e5) +
                      RecomputeSeconds(d, 192, tokens);
  ASSERT_LT(at4, at12);  // the slow NVMe makes the longer cut lose
  ASSERT_LT(at4, RecomputeSeconds(d, 0, tokens));
  EXPECT_EQ(p.cut_blocks, 4u);
  EXPECT_NEAR(p.total_seconds, at4, 1e-15);
  EXPECT_NEAR(p.fetch_all_seconds, at12, 1e-15);
  EXPECT_NEAR(p.recompute_all_seconds, RecomputeSeconds(d, 0, tokens), 1e-15);
  // A fast NVMe: the longest cut.
  const TierLink fast[] = {tiers[0], {"nvme", 20e9, 10e-6}};
  EXPECT_EQ(PlanAmongCuts(d, fast, options, tokens).cut_blocks, 12u);
  // Slow everywhere: recompute.
  const TierLink slow[] = {{"host", 1e6, 0}, {"nvme", 1e6, 0}};
  p = PlanAmongCuts(d, slow, options, tokens);
  EXPECT_EQ(p.cut_blocks, 0u);
  EXPECT_DOUBLE_EQ(p.total_seconds, p.recompute_all_seconds);
  // Options past the tokens covered, or with bytes for other tiers, are ignored.
  options.push_back({17, {0, 0}});
  options.push_back({13, {0}});
  EXPECT_EQ(PlanAmongCuts(d, fast, options, tokens).cut_blocks, 12u);
  EXPECT_EQ(PlanAmongCuts(d, fast, {}, tokens).cut_blocks, 0u);
}

}  // namespace
}  // namespace kvtier::costmodel
