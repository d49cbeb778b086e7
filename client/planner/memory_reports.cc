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

}  // namespace kvtier::planner
