#include "client/planner/planner_reports.h"

#include <string>
#include <vector>

#include "costmodel/catalog.h"
#include "costmodel/hf_config.h"
#include "gtest/gtest.h"

namespace kvtier::planner {
namespace {

using costmodel::Deployment;

Deployment Make(const std::string& model, const std::string& gpu, uint32_t tp = 1) {
  Deployment d;
  d.model = *costmodel::CatalogModel(model);
  d.gpu = *costmodel::CatalogGpu(gpu);
  d.tp = tp;
  EXPECT_TRUE(d.Validate().ok());
  return d;
}

Deployment FromConfig(const std::string& file, const std::string& gpu, uint32_t tp = 1) {
  Deployment d;
  d.model = *costmodel::ModelSpecFromHfConfigFile(std::string(KVTIER_TESTDATA) + "/" + file);
  d.gpu = *costmodel::CatalogGpu(gpu);
  d.tp = tp;
  EXPECT_TRUE(d.Validate().ok());
  return d;
}

void ExpectKeys(const Report& r, const std::vector<std::string>& keys) {
  for (const std::string& k : keys) EXPECT_TRUE(r.json.contains(k)) << "missing key " << k;
  EXPECT_TRUE(r.json.contains("inputs"));
  EXPECT_FALSE(r.text.empty());
}

TEST(PlannerReportsTest, Kv) {
  const Report r = KvReport(Make("llama-3.1-8b", "h100-sxm", 16), 8192);
  ExpectKeys(
      r, {"kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_heads_per_gpu", "kv_replication",
          "bytes_per_block_per_gpu", "layer_groups", "kv_bytes_per_gpu_at_context",
          "sliding_window_saving_fraction", "recurrent_state_bytes_per_request",
          "duplicate_kv_bytes_per_token", "alternative_parallelism", "tp_warning", "block_size"});
  EXPECT_EQ(r.json["kv_bytes_per_token"], 131072);
  EXPECT_EQ(r.json["kv_replication"], 2);
  EXPECT_TRUE(r.json["tp_warning"].is_string());  // TP 16 > 8 KV heads
  EXPECT_NE(r.text.find("WARNING"), std::string::npos);
  const auto& g = r.json["layer_groups"][0];
  for (const char* k : {"kind", "layers", "window"}) EXPECT_TRUE(g.contains(k)) << k;
  EXPECT_TRUE(KvReport(Make("llama-3.1-8b", "h100-sxm", 8), 8192).json["tp_warning"].is_null());
}

TEST(PlannerReportsTest, KvHybrids) {
  Report r = KvReport(FromConfig("sliding_gptoss.json", "h100-sxm"), 131072);
  EXPECT_DOUBLE_EQ(r.json["sliding_window_saving_fraction"].get<double>(), 0.49951171875);
  r = KvReport(FromConfig("recurrent_hybrid.json", "h100-sxm"), 4096);
  EXPECT_EQ(r.json["recurrent_state_bytes_per_request"], 6 * (524288 + 13824));
}

TEST(PlannerReportsTest, Budget) {
  costmodel::BudgetOptions o;
  const Report r = BudgetReport(Make("llama-3.1-8b", "h100-sxm"), o);
  ExpectKeys(r, {"items", "kv_budget_bytes_per_gpu", "max_blocks_per_gpu", "max_tokens_per_gpu",
                 "longest_request_tokens", "oom_risks"});
  for (const auto& item : r.json["items"]) {
    for (const char* k : {"name", "bytes", "measured_by_engine", "note"}) {
      EXPECT_TRUE(item.contains(k)) << k;
    }
  }
  EXPECT_GE(r.json["items"].size(), 8u);  // weights, activations, graphs, the other gigabytes
}

TEST(PlannerReportsTest, FetchDecisionFlipsAtTheReportedBreakeven) {
  const Deployment d = Make("llama-3.1-8b", "h100-sxm");
  costmodel::TierLink tier{"nvme", 1e9, 100e-6};
  Report r = FetchReport(d, 2048, tier, {});
  ExpectKeys(r, {"recompute_seconds", "fetch_seconds", "breakeven_bandwidth_bytes_per_s",
                 "decision", "cut_blocks"});
  const double breakeven = r.json["breakeven_bandwidth_bytes_per_s"].get<double>();
  tier.bytes_per_s = breakeven * 1.000001;
  r = FetchReport(d, 2048, tier, {});
  EXPECT_EQ(r.json["decision"], "fetch");
  EXPECT_EQ(r.json["cut_blocks"], 128);
  tier.bytes_per_s = breakeven * 0.999999;
  r = FetchReport(d, 2048, tier, {});
  EXPECT_EQ(r.json["decision"], "recompute");
  EXPECT_EQ(r.json["cut_blocks"], 0);
}

TEST(PlannerReportsTest, FetchWithTierLayout) {
  const Deployment d = Make("llama-3.1-8b", "h100-sxm");
  const double block = 131072.0 * 16;
  const std::vector<costmodel::Segment> layout = {{{"host", 20e9, 10e-6}, 10, 10 * block},
                                                  {{"nvme", 1e9, 100e-6}, 20, 20 * block}};
  const Report r = FetchReport(d, 480, layout[0].tier, layout);
  EXPECT_EQ(r.json["cut_blocks"], 10);
  EXPECT_EQ(r.json["segments"].size(), 2u);
}

TEST(PlannerReportsTest, ParseFlags) {
  auto bw = ParseTierBandwidths("host=25e9, nvme=3e9");
  ASSERT_TRUE(bw.ok());
  EXPECT_EQ(bw->at("host"), 25e9);
  EXPECT_FALSE(ParseTierBandwidths("host=fast").ok());
  EXPECT_FALSE(ParseTierBandwidths("host=-1").ok());
  auto blocks = ParseTierBlocks("host:10,nvme:20");
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ((*blocks)[1], (std::pair<std::string, uint32_t>{"nvme", 20}));
  EXPECT_FALSE(ParseTierBlocks("host10").ok());
  EXPECT_FALSE(ParseTierBlocks("").ok());
  const Deployment d = Make("llama-3.1-8b", "h100-sxm");
  EXPECT_FALSE(
      DefaultTiers(d, *costmodel::CatalogSsd("samsung-pm9a3-3.84tb"), {{"disk", 1e9}}).ok());
}

TEST(PlannerReportsTest, Tiers) {
  const Deployment d = Make("llama-3.2-1b", "h100-sxm");
  const costmodel::SsdSpec ssd = *costmodel::CatalogSsd("samsung-pm9a3-3.84tb");
  auto tiers = DefaultTiers(d, ssd, {});
  ASSERT_TRUE(tiers.ok());
  const Report r =
      TiersReport(d, 4096, {tiers->at("host"), tiers->at("nvme"), tiers->at("peer")}, ssd, 0);
  ExpectKeys(r, {"tiers", "ssd"});
  for (const char* k : {"tbw_bytes", "sustainable_write_bytes_per_s", "days_to_wear_out"}) {
    EXPECT_TRUE(r.json["ssd"].contains(k)) << k;
  }
  EXPECT_EQ(r.json["tiers"][0]["name"], "host");
  EXPECT_EQ(r.json["tiers"][0]["worthwhile"], true);
  EXPECT_EQ(r.json["tiers"][1]["name"], "nvme");
  EXPECT_EQ(r.json["tiers"][1]["worthwhile"], false);  // question 9's 1B model example
  EXPECT_TRUE(r.json["tiers"][1].contains("value_seconds_per_token"));
}

TEST(PlannerReportsTest, PdPreemptMla) {
  Report r = PdReport(Make("llama-3.2-1b", "b200"), 4096, costmodel::CatalogLinks());
  ExpectKeys(r, {"required_link_bytes_per_s_per_gpu", "links"});
  EXPECT_TRUE(r.json["links"][0].contains("sufficient"));
  costmodel::PreemptOptions o;
  o.victim_tokens = 8192;
  r = PreemptReport(Make("llama-3.1-8b", "h100-sxm"), o);
  ExpectKeys(r, {"recompute_seconds", "swap_out_seconds", "swap_in_seconds", "policies"});
  EXPECT_EQ(r.json["policies"].size(), 3u);
  EXPECT_TRUE(r.json["policies"][0].contains("who_pays"));
  r = MlaReport(FromConfig("mla_deepseek.json", "h200", 8));
  ExpectKeys(r, {"flops_per_cached_token", "bytes_per_cached_token", "arithmetic_intensity",
                 "ridge_point", "regime"});
  EXPECT_EQ(r.json["regime"], "compute-bound");
  EXPECT_EQ(MlaReport(Make("llama-3.1-8b", "h100-sxm")).json["regime"], "memory-bound");
}

TEST(PlannerReportsTest, QuantFp8) {
  costmodel::QuantLayout q;
  absl::StatusOr<Report> r = QuantReport(Make("llama-3.1-8b", "h100-sxm"), q);
  ASSERT_TRUE(r.ok());
  ExpectKeys(*r, {"bytes_per_token", "residual_tokens"});
  EXPECT_EQ(r->json["bytes_per_token"], 34816);
  EXPECT_FALSE(QuantReport(FromConfig("mla_deepseek.json", "h200"), q).ok());
  r = Fp8Report(Make("llama-3.1-8b", "h100-sxm"), "e4m3", 1, {100, 500});
  ASSERT_TRUE(r.ok());
  ExpectKeys(*r, {"bytes_saved_per_token", "clip_rate"});
  EXPECT_EQ(r->json["clip_rate"], 0.5);
}

TEST(PlannerReportsTest, SharingStrandState) {
  absl::StatusOr<costmodel::PromptSet> set =
      costmodel::ParsePrompts("[1,2,3,4,5]\n[1,2,3,4,6]\n", 4);
  ASSERT_TRUE(set.ok());
  Report r = SharingReport(Make("llama-3.1-8b", "h100-sxm"), *set, 1);
  ExpectKeys(r, {"blocks_without_sharing", "blocks_with_sharing", "saving_fraction", "cow_copies"});
  EXPECT_EQ(r.json["blocks_without_sharing"], 4);
  EXPECT_EQ(r.json["blocks_with_sharing"], 3);
  r = StrandReport(Make("llama-3.1-8b", "h100-sxm"), *set, 1);
  ExpectKeys(r, {"policies"});
  EXPECT_EQ(r.json["policies"][1]["eviction"], "leaf_first");
  EXPECT_EQ(r.json["policies"][1]["stranded_blocks_final"], 0);
  r = StateReport(FromConfig("recurrent_hybrid.json", "h100-sxm"), 100, 4096);
  ExpectKeys(r,
             {"state_bytes_per_request", "state_bytes_per_checkpoint", "restart_boundary_tokens"});
  EXPECT_EQ(r.json["restart_boundary_tokens"], 400);
}

}  // namespace
}  // namespace kvtier::planner
