#include "client/planner/planner_reports.h"

#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "costmodel/attention_roofline.h"
#include "costmodel/catalog.h"
#include "costmodel/kv_footprint.h"
#include "costmodel/pd_link.h"
#include "costmodel/tier_value.h"

namespace kvtier::planner {
namespace {

using costmodel::Deployment;
using nlohmann::json;

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = b;
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f B", b)
                : absl::StrFormat("%.0f B (%.2f %s)", b, v, units[u]);
}

std::string Secs(double s) {
  if (std::isinf(s)) return "never";
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3f ms", s * 1e3);
  if (s >= 1e-6) return absl::StrFormat("%.3f us", s * 1e6);
  return absl::StrFormat("%.3f ns", s * 1e9);
}

std::string Rate(double bps) {
  if (std::isinf(bps)) return "unreachable (latency alone exceeds recompute)";
  return absl::StrFormat("%.3f GB/s", bps / 1e9);
}

// JSON has no infinity: unbounded values are null.
json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string KvElement(const Deployment& d) { return d.kv_bytes_per_element == 1 ? "fp8" : "bf16"; }

json TierJson(const costmodel::TierLink& t) {
  return {{"name", t.name}, {"bytes_per_s", t.bytes_per_s}, {"latency_s", t.latency_s}};
}

}  // namespace

json DeploymentJson(const Deployment& d) {
  const costmodel::ParameterCounts p = d.model.Parameters();
  return {{"model", d.model.name},
          {"gpu", d.gpu.name},
          {"tp", d.tp},
          {"kv_dtype", KvElement(d)},
          {"block_tokens", d.block_tokens},
          {"mfu", d.mfu},
          {"compute_dtype", d.fp8_compute ? "fp8" : "bf16"},
          {"gpu_flops", costmodel::PeakFlops(d.gpu, d.fp8_compute)},
          {"params_total", p.total},
          {"params_active", p.active},
          {"params_prefill", p.prefill}};
}

absl::StatusOr<std::map<std::string, costmodel::TierLink>> DefaultTiers(
    const Deployment& d, const costmodel::SsdSpec& ssd,
    const std::map<std::string, double>& overrides) {
  std::map<std::string, costmodel::TierLink> tiers;
  tiers["host"] = {"host", d.gpu.host_link_bytes_per_s, 10e-6};
  tiers["nvme"] = {"nvme", ssd.read_bytes_per_s, ssd.read_latency_s};
  const costmodel::LinkSpec nic = *costmodel::CatalogLink("nic-200g");
  tiers["peer"] = {"peer", nic.bytes_per_s, nic.latency_s};
  for (const auto& [name, bw] : overrides) {
    auto it = tiers.find(name);
    if (it == tiers.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown tier '", name, "'; tiers are host, nvme, peer"));
    }
    it->second.bytes_per_s = bw;
  }
  return tiers;
}

absl::StatusOr<std::map<std::string, double>> ParseTierBandwidths(const std::string& text) {
  std::map<std::string, double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, '=');
    double v = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &v) || !(v > 0) ||
        !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tier-bandwidth: '", part, "' is not TIER=BYTES_PER_SECOND with a positive number"));
    }
    out[std::string(absl::StripAsciiWhitespace(kv.first))] = v;
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, uint32_t>>> ParseTierBlocks(
    const std::string& text) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, ':');
    uint32_t n = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tiers: '", part, "' is not TIER:BLOCKS (e.g. host:10)"));
    }
    out.emplace_back(std::string(absl::StripAsciiWhitespace(kv.first)), n);
  }
  if (out.empty()) return absl::InvalidArgumentError("--tiers: no TIER:BLOCKS given");
  return out;
}

Report KvReport(const Deployment& d, double context) {
  const costmodel::KvFootprint f = costmodel::ComputeKvFootprint(d);
  const costmodel::ModelSpec& m = d.model;
  const costmodel::BlockSizeReport bs = costmodel::BlockSize(d, context);
  Report r;
  json groups = json::array();
  for (const costmodel::GroupFootprint& g : f.groups) {
    groups.push_back({{"kind", costmodel::LayerKindName(g.group.kind)},
                      {"layers", g.group.layers},
                      {"window", g.group.window},
                      {"bytes_per_token_per_gpu", g.bytes_per_token_per_gpu}});
  }
  std::string tp_warning;
  if (f.replication > 1) {
    tp_warning = absl::StrFormat(
        "TP %d stores each KV %s %.0f times: %s per token of duplicate bytes cluster-wide. "
        "Alternative: %s",
        d.tp, m.mla.has_value() ? "latent" : "head", f.replication,
        Bytes(f.duplicate_bytes_per_token), f.alternative);
  }
  r.json = {
      {"inputs", DeploymentJson(d)},
      {"kv_bytes_per_token", f.bytes_per_token},
      {"kv_bytes_per_token_per_gpu", f.bytes_per_token_per_gpu},
      {"kv_heads_per_gpu", f.kv_heads_per_gpu},
      {"kv_replication", f.replication},
      {"duplicate_kv_bytes_per_token", f.duplicate_bytes_per_token},
      {"alternative_parallelism", f.alternative},
      {"tp_warning", tp_warning.empty() ? json(nullptr) : json(tp_warning)},
      {"bytes_per_block_per_gpu", f.bytes_per_block_per_gpu},
      {"layer_groups", groups},
      {"context_tokens", context},
      {"kv_bytes_per_gpu_at_context", costmodel::KvBytesPerGpuAtContext(d, context)},
      {"sliding_window_saving_fraction", costmodel::SlidingWindowSaving(d, context)},
      {"recurrent_state_bytes_per_request", f.recurrent_state_bytes_per_request},
      {"recurrent_state_bytes_per_request_per_gpu", f.recurrent_state_bytes_per_request_per_gpu},
      {"block_size",
       {{"block_tokens", d.block_tokens},
        {"max_waste_tokens_per_sequence", bs.max_waste_tokens_per_sequence},
        {"max_waste_fraction", bs.max_waste_fraction},
        {"blocks_per_sequence", bs.blocks_per_sequence},
        {"prefix_match_granularity_tokens", bs.prefix_match_granularity_tokens}}}};
  std::string& t = r.text;
  const uint32_t attn = m.AttentionLayers();
  if (m.mla.has_value()) {
    absl::StrAppendFormat(&t,
                          "KV per token      = latent (kv_lora_rank %d + rope %d) x %g bytes x "
                          "%d attention layers = %s\n",
                          m.mla->kv_lora_rank, m.mla->qk_rope_head_dim, d.kv_bytes_per_element,
                          attn, Bytes(f.bytes_per_token));
    absl::StrAppendFormat(&t, "KV per GPU/token  = the whole latent on each of %d ranks = %s\n",
                          d.tp, Bytes(f.bytes_per_token_per_gpu));
  } else {
    absl::StrAppendFormat(&t,
                          "KV per token      = 2 (K,V) x %d layers x %d KV heads x %d dims x %g "
                          "bytes = %s\n",
                          attn, m.num_kv_heads, m.head_dim, d.kv_bytes_per_element,
                          Bytes(f.bytes_per_token));
    absl::StrAppendFormat(
        &t, "KV heads per GPU  = max(1, %d / TP %d) = %g; KV per GPU/token = %s\n", m.num_kv_heads,
        d.tp, f.kv_heads_per_gpu, Bytes(f.bytes_per_token_per_gpu));
  }
  absl::StrAppendFormat(&t, "bytes per block   = %s x %d tokens = %s per GPU\n",
                        Bytes(f.bytes_per_token_per_gpu), d.block_tokens,
                        Bytes(f.bytes_per_block_per_gpu));
  for (const costmodel::GroupFootprint& g : f.groups) {
    absl::StrAppendFormat(&t, "layer group       %s: %d layers%s, %s per token per GPU\n",
                          costmodel::LayerKindName(g.group.kind), g.group.layers,
                          g.group.window ? absl::StrCat(", window ", g.group.window) : "",
                          Bytes(g.bytes_per_token_per_gpu));
  }
  absl::StrAppendFormat(&t, "at %.0f tokens      = %s per GPU (sliding layers hold min(w, n))\n",
                        context, Bytes(costmodel::KvBytesPerGpuAtContext(d, context)));
  absl::StrAppendFormat(&t,
                        "sliding saving    = f x (1 - min(w, n) / n) = %.4f (delivered only by an "
                        "allocator with a block pool per layer group)\n",
                        costmodel::SlidingWindowSaving(d, context));
  if (f.recurrent_state_bytes_per_request > 0) {
    absl::StrAppendFormat(&t, "recurrent state   = %s per request (%s per GPU)\n",
                          Bytes(f.recurrent_state_bytes_per_request),
                          Bytes(f.recurrent_state_bytes_per_request_per_gpu));
  }
  absl::StrAppendFormat(&t,
                        "block size %d       : waste <= %d tokens per sequence = %.4f of %.0f "
                        "tokens; prefixes match in steps of %d tokens\n",
                        d.block_tokens, d.block_tokens - 1, bs.max_waste_fraction, context,
                        d.block_tokens);
  if (!tp_warning.empty()) absl::StrAppend(&t, "WARNING: ", tp_warning, "\n");
  return r;
}

Report BudgetReport(const Deployment& d, const costmodel::BudgetOptions& o) {
  const costmodel::MemoryBudget b = costmodel::PlanMemoryBudget(d, o);
  Report r;
  json items = json::array();
  std::string& t = r.text;
  absl::StrAppendFormat(&t, "usable            = util %.2f x %s = %s\n", o.util,
                        Bytes(d.gpu.memory_bytes), Bytes(b.usable_bytes));
  for (const costmodel::BudgetItem& i : b.items) {
    items.push_back({{"name", i.name},
                     {"bytes", i.bytes},
                     {"measured_by_engine", i.measured_by_engine},
                     {"note", i.note}});
    absl::StrAppendFormat(&t, "  - %-24s %s  [%s] %s\n", i.name, Bytes(i.bytes),
                          i.measured_by_engine ? "measured" : "estimated", i.note);
  }
  absl::StrAppendFormat(
      &t, "KV budget per GPU = %s%s\n", Bytes(b.kv_budget_bytes_per_gpu),
      b.shortfall_bytes > 0 ? absl::StrCat(" (short by ", Bytes(b.shortfall_bytes), ")") : "");
  const double block = costmodel::ComputeKvFootprint(d).bytes_per_block_per_gpu;
  absl::StrAppendFormat(&t, "blocks            = floor(%s / %s) = %.0f; tokens = %.0f\n",
                        Bytes(b.kv_budget_bytes_per_gpu), Bytes(block), b.max_blocks_per_gpu,
                        b.max_tokens_per_gpu);
  absl::StrAppendFormat(&t,
                        "longest request   = %s tokens with a block pool per layer group "
                        "(sliding layers keep only their window); %.0f with one pool\n",
                        std::isinf(b.longest_request_tokens)
                            ? "unbounded (KV stops growing past the windows)"
                            : absl::StrFormat("%.0f", b.longest_request_tokens),
                        b.max_tokens_per_gpu);
  for (const std::string& risk : b.oom_risks) absl::StrAppend(&t, "OOM risk: ", risk, "\n");
  r.json = {{"inputs", DeploymentJson(d)},
            {"util", o.util},
            {"usable_bytes", b.usable_bytes},
            {"items", items},
            {"kv_budget_bytes_per_gpu", b.kv_budget_bytes_per_gpu},
            {"shortfall_bytes", b.shortfall_bytes},
            {"max_blocks_per_gpu", b.max_blocks_per_gpu},
            {"max_tokens_per_gpu", b.max_tokens_per_gpu},
            {"longest_request_tokens", Num(b.longest_request_tokens)},
            {"longest_request_tokens_single_pool", b.max_tokens_per_gpu},
            {"oom_risks", b.oom_risks}};
  return r;
}

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

Report PreemptReport(const Deployment& d, const costmodel::PreemptOptions& o) {
  const costmodel::PreemptPlan p = costmodel::PlanPreemption(d, o);
  Report r;
  json pj = json::array();
  std::string& t = r.text;
  absl::StrAppendFormat(&t, "victim            = %.0f tokens, %s KV per GPU\n", o.victim_tokens,
                        Bytes(p.victim_bytes_per_gpu));
  absl::StrAppendFormat(&t, "recompute         = %s\n", Secs(p.recompute_seconds));
  absl::StrAppendFormat(&t, "swap out / in     = %s / %s over %s\n", Secs(p.swap_out_seconds),
                        Secs(p.swap_in_seconds), Rate(d.gpu.host_link_bytes_per_s));
  absl::StrAppendFormat(&t, "wait              = %.0f decode steps x %s = %s\n",
                        o.victim_remaining_tokens, Secs(p.decode_step_seconds),
                        Secs(p.wait_seconds));
  for (const costmodel::PolicyCost& c : p.policies) {
    pj.push_back({{"policy", c.policy},
                  {"victim_delay_seconds", c.victim_delay_seconds},
                  {"arrivals_delay_seconds", c.arrivals_delay_seconds},
                  {"busy_seconds", c.gpu_busy_seconds},
                  {"who_pays", c.who_pays}});
    absl::StrAppendFormat(&t, "  %-9s who pays: %s\n", c.policy, c.who_pays);
  }
  r.json = {{"inputs", DeploymentJson(d)},
            {"victim_tokens", o.victim_tokens},
            {"victim_bytes_per_gpu", p.victim_bytes_per_gpu},
            {"recompute_seconds", p.recompute_seconds},
            {"swap_out_seconds", p.swap_out_seconds},
            {"swap_in_seconds", p.swap_in_seconds},
            {"wait_seconds", p.wait_seconds},
            {"decode_step_seconds", p.decode_step_seconds},
            {"policies", pj}};
  return r;
}

Report MlaReport(const Deployment& d) {
  const costmodel::AttentionRoofline a = costmodel::ComputeAttentionRoofline(d);
  Report r;
  r.json = {
      {"inputs", DeploymentJson(d)},
      {"attention", a.attention},
      {"flops_per_cached_token", a.flops_per_cached_token},
      {"bytes_per_cached_token", a.bytes_per_cached_token},
      {"flops_per_cached_token_all_layers", a.flops_per_cached_token * d.model.AttentionLayers()},
      {"arithmetic_intensity", a.arithmetic_intensity},
      {"ridge_point", a.ridge_point},
      {"regime", a.regime},
      {"gqa_arithmetic_intensity", a.gqa_arithmetic_intensity}};
  std::string& t = r.text;
  const costmodel::ModelSpec& m = d.model;
  if (m.mla.has_value()) {
    absl::StrAppendFormat(&t,
                          "FLOPs per cached token per layer = H_q %d x (2 x (%d + %d) + 2 x %d) = "
                          "%.0f\n",
                          m.num_attention_heads, m.mla->kv_lora_rank, m.mla->qk_rope_head_dim,
                          m.mla->kv_lora_rank, a.flops_per_cached_token);
    absl::StrAppendFormat(&t, "bytes per cached token per layer = (%d + %d) x %g = %.0f\n",
                          m.mla->kv_lora_rank, m.mla->qk_rope_head_dim, d.kv_bytes_per_element,
                          a.bytes_per_cached_token);
  } else {
    absl::StrAppendFormat(&t, "FLOPs per cached token per layer = 4 x H_q %d x d %d = %.0f\n",
                          m.num_attention_heads, m.head_dim, a.flops_per_cached_token);
    absl::StrAppendFormat(
        &t, "bytes per cached token per layer = 2 x %d KV heads x %d x %g = %.0f\n", m.num_kv_heads,
        m.head_dim, d.kv_bytes_per_element, a.bytes_per_cached_token);
  }
  absl::StrAppendFormat(&t, "intensity         = %.1f FLOP/byte; ridge point of %s = %.1f\n",
                        a.arithmetic_intensity, d.gpu.name, a.ridge_point);
  absl::StrAppendFormat(&t, "regime            = %s (per-head K/V layout: %.1f FLOP/byte)\n",
                        a.regime, a.gqa_arithmetic_intensity);
  return r;
}

absl::StatusOr<Report> QuantReport(const Deployment& d, const costmodel::QuantLayout& q) {
  absl::StatusOr<costmodel::QuantReport> qr = costmodel::EvaluateQuantLayout(d, q);
  if (!qr.ok()) return qr.status();
  Report r;
  r.json = {{"inputs", DeploymentJson(d)},
            {"k_layout", q.k_per_channel ? "per-channel" : "per-token"},
            {"v_layout", q.v_per_channel ? "per-channel" : "per-token"},
            {"group", q.group},
            {"bits", q.bits},
            {"bytes_per_token", qr->bytes_per_token},
            {"data_bytes_per_token", qr->data_bytes_per_token},
            {"scale_bytes_per_token", qr->scale_bytes_per_token},
            {"bytes_per_token_unquantized", qr->bytes_per_token_unquantized},
            {"compression", qr->compression},
            {"residual_tokens", qr->residual_tokens},
            {"residual_bytes", qr->residual_bytes}};
  absl::StrAppendFormat(&r.text,
                        "data              = 2 x %d layers x %d heads x %d dims x %d bits / 8 = "
                        "%s\n",
                        d.model.AttentionLayers(), d.model.num_kv_heads, d.model.head_dim, q.bits,
                        Bytes(qr->data_bytes_per_token));
  absl::StrAppendFormat(&r.text, "scales            = K %s, V %s, group %d, %g-byte scale%s = %s\n",
                        q.k_per_channel ? "per channel" : "per token",
                        q.v_per_channel ? "per channel" : "per token", q.group, q.scale_bytes,
                        q.zero_point ? " + zero point" : "", Bytes(qr->scale_bytes_per_token));
  absl::StrAppendFormat(&r.text, "bytes per token   = %s (%.2fx smaller than %s)\n",
                        Bytes(qr->bytes_per_token), qr->compression, KvElement(d));
  absl::StrAppendFormat(&r.text,
                        "residual          = up to %d newest tokens stay unquantized until their "
                        "group fills: %s per request\n",
                        qr->residual_tokens, Bytes(qr->residual_bytes));
  return r;
}

absl::StatusOr<Report> Fp8Report(const Deployment& d, const std::string& format, double scale,
                                 const std::vector<double>& amax) {
  absl::StatusOr<costmodel::Fp8Report> f = costmodel::EvaluateFp8(d, format, scale, amax);
  if (!f.ok()) return f.status();
  Report r;
  r.json = {{"inputs", DeploymentJson(d)},
            {"format", format},
            {"scale", scale},
            {"bytes_per_token_bf16", f->bytes_per_token_bf16},
            {"bytes_per_token_fp8", f->bytes_per_token_fp8},
            {"bytes_saved_per_token", f->bytes_saved_per_token},
            {"saturation_threshold", f->saturation_threshold},
            {"samples", f->samples},
            {"clip_rate", f->clip_rate}};
  absl::StrAppendFormat(&r.text, "bytes per token   = %s (bf16) -> %s (fp8): %s saved\n",
                        Bytes(f->bytes_per_token_bf16), Bytes(f->bytes_per_token_fp8),
                        Bytes(f->bytes_saved_per_token));
  absl::StrAppendFormat(&r.text, "saturation        = %s max x scale %g = %g\n", format, scale,
                        f->saturation_threshold);
  absl::StrAppendFormat(&r.text, "clip rate         = %.6f of %d amax samples\n", f->clip_rate,
                        f->samples);
  return r;
}

Report SharingReport(const Deployment& d, const costmodel::PromptSet& prompts, uint32_t samples) {
  const costmodel::SharingReport s = costmodel::AnalyzeSharing(prompts, samples);
  const double block_bytes =
      costmodel::ComputeKvFootprint(d).bytes_per_token_per_gpu * prompts.block_tokens;
  Report r;
  r.json = {
      {"inputs", DeploymentJson(d)},
      {"prompts", s.prompts},
      {"samples", samples},
      {"block_tokens", prompts.block_tokens},
      {"blocks_without_sharing", s.blocks_without_sharing},
      {"blocks_with_sharing", s.blocks_with_sharing},
      {"saving_fraction", s.saving_fraction},
      {"cow_copies", s.cow_copies},
      {"partial_blocks", s.partial_blocks},
      {"bytes_saved_per_gpu",
       (static_cast<double>(s.blocks_without_sharing) - s.blocks_with_sharing) * block_bytes}};
  absl::StrAppendFormat(&r.text, "prompts           = %d x %d samples, blocks of %d tokens%s\n",
                        s.prompts, samples, prompts.block_tokens,
                        prompts.from_trace_hash_ids ? " (the trace's hash_ids blocks)" : "");
  absl::StrAppendFormat(&r.text, "without sharing   = %d blocks\n", s.blocks_without_sharing);
  absl::StrAppendFormat(&r.text,
                        "with sharing      = %d distinct prefixes + %d partial blocks + %d "
                        "copy-on-write copies = %d blocks\n",
                        prompts.node_count, s.partial_blocks, s.cow_copies, s.blocks_with_sharing);
  absl::StrAppendFormat(&r.text, "saving            = %.4f\n", s.saving_fraction);
  return r;
}

Report StrandReport(const Deployment& d, const costmodel::PromptSet& prompts,
                    uint64_t capacity_blocks) {
  const double block_bytes =
      costmodel::ComputeKvFootprint(d).bytes_per_token_per_gpu * prompts.block_tokens;
  Report r;
  json pj = json::array();
  for (bool leaf_first : {false, true}) {
    const costmodel::EvictionReport e =
        costmodel::SimulateEviction(prompts, capacity_blocks, leaf_first);
    const double hit_rate = e.lookups ? static_cast<double>(e.hits) / e.lookups : 0;
    const char* name = leaf_first ? "leaf_first" : "lru";
    pj.push_back({{"eviction", name},
                  {"hit_rate", hit_rate},
                  {"evictions", e.evictions},
                  {"stranded_blocks_final", e.stranded_blocks_final},
                  {"stranded_bytes_final", e.stranded_blocks_final * block_bytes},
                  {"stranded_blocks_peak", e.stranded_blocks_peak}});
    absl::StrAppendFormat(&r.text,
                          "%-10s hit rate %.4f, %d evictions, stranded %d blocks (%s) at the "
                          "end, %d at the peak\n",
                          name, hit_rate, e.evictions, e.stranded_blocks_final,
                          Bytes(e.stranded_blocks_final * block_bytes), e.stranded_blocks_peak);
  }
  r.json = {{"inputs", DeploymentJson(d)},
            {"prompts", prompts.prompts.size()},
            {"capacity_blocks", capacity_blocks},
            {"block_tokens", prompts.block_tokens},
            {"policies", pj}};
  return r;
}

Report StateReport(const Deployment& d, uint64_t interval, double context) {
  const costmodel::StatePlan s = costmodel::PlanState(d, interval, context);
  Report r;
  r.json = {{"inputs", DeploymentJson(d)},
            {"recurrent_layers", s.recurrent_layers},
            {"ssm_state_bytes_per_layer", s.ssm_state_bytes_per_layer},
            {"conv_state_bytes_per_layer", s.conv_state_bytes_per_layer},
            {"state_bytes_per_request", s.state_bytes_per_request},
            {"state_bytes_per_checkpoint", s.state_bytes_per_checkpoint},
            {"checkpoint_interval_tokens", interval},
            {"restart_boundary_tokens", s.restart_boundary_tokens},
            {"context_tokens", context},
            {"checkpoints_at_context", s.checkpoints_at_context},
            {"checkpoint_bytes_at_context", s.checkpoint_bytes_at_context}};
  std::string& t = r.text;
  if (s.recurrent_layers == 0) {
    absl::StrAppend(&t, "no recurrent layers: attention blocks restart at any block boundary\n");
  }
  absl::StrAppendFormat(&t, "per layer         = SSM %s + conv %s\n",
                        Bytes(s.ssm_state_bytes_per_layer), Bytes(s.conv_state_bytes_per_layer));
  absl::StrAppendFormat(&t, "per request       = %d layers x that = %s (one checkpoint = %s)\n",
                        s.recurrent_layers, Bytes(s.state_bytes_per_request),
                        Bytes(s.state_bytes_per_checkpoint));
  if (s.recurrent_layers == 0) {
    absl::StrAppendFormat(&t, "restart boundary  = any block boundary = %d tokens\n",
                          s.restart_boundary_tokens);
  } else {
    absl::StrAppendFormat(&t,
                          "restart boundary  = lcm(block %d, checkpoint interval %d) = %d tokens\n",
                          d.block_tokens, interval, s.restart_boundary_tokens);
  }
  absl::StrAppendFormat(&t, "at %.0f tokens      = %.0f checkpoints = %s\n", context,
                        s.checkpoints_at_context, Bytes(s.checkpoint_bytes_at_context));
  return r;
}

}  // namespace kvtier::planner
