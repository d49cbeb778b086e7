#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/planner/planner_reports.h"
#include "client/planner/report_format.h"
#include "costmodel/attention_roofline.h"
#include "costmodel/catalog.h"
#include "costmodel/kv_footprint.h"
#include "costmodel/pd_link.h"
#include "costmodel/tier_value.h"

namespace kvtier::planner {

using costmodel::Deployment;
using nlohmann::json;

Report FetchReport(const Deployment& d, double tokens, const costmodel::TierLink& tier,
                   const std::vector<costmodel::Segment>& layout, uint64_t checkpoint_interval) {
  const double bpt = costmodel::ComputeKvFootprint(d).bytes_per_token_per_gpu;
  const double recompute = costmodel::RecomputeSeconds(d, 0, tokens);
  const double fetch = costmodel::FetchSeconds(tier, tokens * bpt);
  const double breakeven = costmodel::BreakevenBandwidth(d, tier, tokens);
  const double asymptotic = costmodel::AsymptoticBreakevenBandwidth(d);
  // A recurrent model without state checkpoints cannot restore from blocks.
  const bool fetch_wins =
      fetch < recompute && costmodel::CutConstraintsFor(d, checkpoint_interval).step_blocks > 0;
  std::vector<costmodel::Segment> segs = layout;
  if (segs.empty()) {
    const uint32_t blocks = static_cast<uint32_t>(tokens / d.block_tokens);
    segs.push_back({tier, blocks, blocks * bpt * d.block_tokens});
  }
  const costmodel::CutConstraints constraints =
      costmodel::CutConstraintsFor(d, checkpoint_interval);
  const costmodel::CutPlan cut = costmodel::PlanCut(d, segs, tokens, constraints);
  std::vector<std::string> notes;
  if (constraints.step_blocks == 0) {
    notes.push_back(
        "recurrent layers and no state checkpoints (--checkpoint-interval): the "
        "prefix cannot be restored from cached blocks, so the cut is 0");
  } else if (constraints.step_blocks > 1 || constraints.state_bytes > 0) {
    notes.push_back(absl::StrFormat(
        "recurrent layers: cuts only at multiples of %d blocks, each adding %s of state",
        constraints.step_blocks, Bytes(constraints.state_bytes)));
  }
  if (tier.latency_s > 0.1 * recompute) {
    notes.push_back("short prefix: the tier's fixed latency is a large part of the cost");
  }
  if (tier.bytes_per_s < asymptotic) {
    notes.push_back(fetch_wins
                        ? "the tier is below the short-prefix break-even bandwidth: fetching wins "
                          "here only because attention makes long prefixes costly to recompute"
                        : "the tier is below the short-prefix break-even bandwidth: fetching "
                          "loses unless the prefix is long enough for attention to dominate");
  }
  if (asymptotic > 50e9) {
    notes.push_back("small model: recompute is cheap; only tiers faster than a PCIe 5 link win");
  }
  json segments = json::array();
  for (const costmodel::Segment& s : segs) {
    segments.push_back({{"tier", TierJson(s.tier)}, {"blocks", s.blocks}, {"bytes", s.bytes}});
  }
  Report r;
  r.json = {{"inputs", DeploymentJson(d)},
            {"tokens", tokens},
            {"tier", TierJson(tier)},
            {"kv_bytes_per_token_per_gpu", bpt},
            {"recompute_seconds", recompute},
            {"fetch_seconds", fetch},
            {"breakeven_bandwidth_bytes_per_s", Num(breakeven)},
            {"breakeven_bandwidth_no_latency_bytes_per_s", asymptotic},
            {"bandwidth_to_breakeven_ratio", Num(tier.bytes_per_s / breakeven)},
            {"decision", fetch_wins ? "fetch" : "recompute"},
            {"speedup", fetch_wins ? recompute / fetch : 1.0},
            {"segments", segments},
            {"cut_blocks", cut.cut_blocks},
            {"cut_fetch_seconds", cut.fetch_seconds},
            {"cut_recompute_seconds", cut.recompute_seconds},
            {"planned_seconds", cut.total_seconds},
            {"notes", notes}};
  std::string& t = r.text;
  const costmodel::ParameterCounts p = d.model.Parameters();
  absl::StrAppendFormat(&t,
                        "recompute         = (%.0f tokens x 2 x %.4g prefill params + attention) "
                        "/ (TP %d x %.4g FLOP/s x MFU %.2f) = %s\n",
                        tokens, p.prefill, d.tp, costmodel::PeakFlops(d.gpu, d.fp8_compute), d.mfu,
                        Secs(recompute));
  absl::StrAppendFormat(&t, "fetch (%s)        = %s + %.0f tokens x %s / %s = %s\n", tier.name,
                        Secs(tier.latency_s), tokens, Bytes(bpt), Rate(tier.bytes_per_s),
                        Secs(fetch));
  absl::StrAppendFormat(&t,
                        "break-even        = %s for this prefix; %s per token without "
                        "latency and attention\n",
                        Rate(breakeven), Rate(asymptotic));
  absl::StrAppendFormat(&t, "decision          = %s (the whole prefix from %s)\n",
                        fetch_wins ? "fetch" : "recompute", tier.name);
  absl::StrAppendFormat(
      &t,
      "cut               = fetch blocks [0, %d) of the layout, recompute the rest: %s "
      "+ %s = %s\n",
      cut.cut_blocks, Secs(cut.fetch_seconds), Secs(cut.recompute_seconds),
      Secs(cut.total_seconds));
  for (const std::string& n : notes) absl::StrAppend(&t, "note: ", n, "\n");
  return r;
}

Report TiersReport(const Deployment& d, double tokens,
                   const std::vector<costmodel::TierLink>& tiers, const costmodel::SsdSpec& ssd,
                   double write_rate) {
  Report r;
  json tj = json::array();
  std::string& t = r.text;
  const double asymptotic = costmodel::AsymptoticBreakevenBandwidth(d);
  absl::StrAppendFormat(&t, "break-even bandwidth (short prefix) = %s per GPU\n", Rate(asymptotic));
  for (const costmodel::TierLink& link : tiers) {
    const costmodel::TierValue v = costmodel::EvaluateTier(d, link, tokens);
    tj.push_back({{"name", link.name},
                  {"bytes_per_s", link.bytes_per_s},
                  {"latency_s", link.latency_s},
                  {"breakeven_bandwidth_bytes_per_s", asymptotic},
                  {"bandwidth_to_breakeven_ratio", link.bytes_per_s / asymptotic},
                  {"recompute_seconds_per_token", v.recompute_seconds_per_token},
                  {"fetch_seconds_per_token", v.fetch_seconds_per_token},
                  {"value_seconds_per_token", v.value_seconds_per_token},
                  {"worthwhile", v.worthwhile}});
    absl::StrAppendFormat(
        &t, "%-5s %.2fx break-even; value = recompute %s - fetch %s = %s per token: %s\n",
        link.name, link.bytes_per_s / asymptotic, Secs(v.recompute_seconds_per_token),
        Secs(v.fetch_seconds_per_token),
        absl::StrCat(v.value_seconds_per_token < 0 ? "-" : "",
                     Secs(std::fabs(v.value_seconds_per_token))),
        v.worthwhile ? "worthwhile" : "NOT worthwhile (do not admit)");
  }
  const costmodel::SsdWear w = costmodel::EvaluateSsdWear(ssd, write_rate);
  absl::StrAppendFormat(&t, "SSD %s: TBW = %s x %.3g DWPD x 365 x %.0f years = %s\n", ssd.name,
                        Bytes(ssd.capacity_bytes), ssd.dwpd, ssd.warranty_years,
                        Bytes(w.tbw_bytes));
  absl::StrAppendFormat(&t, "sustainable write = capacity x DWPD / 86400 = %s\n",
                        Rate(w.sustainable_write_bytes_per_s));
  absl::StrAppendFormat(&t, "at %s          = %.1f days to wear-out\n", Rate(w.write_bytes_per_s),
                        w.days_to_wear_out);
  r.json = {{"inputs", DeploymentJson(d)},
            {"tokens", tokens},
            {"tiers", tj},
            {"ssd",
             {{"name", ssd.name},
              {"capacity_bytes", ssd.capacity_bytes},
              {"dwpd", ssd.dwpd},
              {"warranty_years", ssd.warranty_years},
              {"tbw_bytes", w.tbw_bytes},
              {"sustainable_write_bytes_per_s", w.sustainable_write_bytes_per_s},
              {"write_bytes_per_s", w.write_bytes_per_s},
              {"days_to_wear_out", w.days_to_wear_out}}}};
  return r;
}

Report PdReport(const Deployment& d, double prompt_tokens,
                const std::vector<costmodel::LinkSpec>& links) {
  const costmodel::PdPlan p = costmodel::PlanPd(d, prompt_tokens, links);
  Report r;
  json lj = json::array();
  std::string& t = r.text;
  absl::StrAppendFormat(&t, "required per GPU  = %s KV per token / %s prefill per token = %s\n",
                        Bytes(p.bytes_per_token_per_gpu), Secs(p.prefill_seconds_per_token),
                        Rate(p.required_link_bytes_per_s_per_gpu));
  for (const costmodel::LinkVerdict& v : p.links) {
    lj.push_back({{"name", v.link.name},
                  {"bytes_per_s", v.link.bytes_per_s},
                  {"sufficient", v.sufficient},
                  {"utilisation", v.utilisation}});
    absl::StrAppendFormat(&t, "  %-9s %s: %s (%.0f%% busy)\n", v.link.name,
                          Rate(v.link.bytes_per_s), v.sufficient ? "sufficient" : "TOO SLOW",
                          100 * v.utilisation);
  }
  r.json = {{"inputs", DeploymentJson(d)},
            {"prompt_tokens", prompt_tokens},
            {"kv_bytes_per_token_per_gpu", p.bytes_per_token_per_gpu},
            {"prefill_seconds_per_token", p.prefill_seconds_per_token},
            {"required_link_bytes_per_s_per_gpu", p.required_link_bytes_per_s_per_gpu},
            {"transfer_bytes_per_gpu", p.transfer_bytes_per_gpu},
            {"links", lj}};
  return r;
}

}  // namespace kvtier::planner
