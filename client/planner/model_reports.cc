#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
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
  ASSIGN_OR_RETURN(costmodel::QuantReport qr, costmodel::EvaluateQuantLayout(d, q));
  Report r;
  r.json = {{"inputs", DeploymentJson(d)},
            {"k_layout", q.k_per_channel ? "per-channel" : "per-token"},
            {"v_layout", q.v_per_channel ? "per-channel" : "per-token"},
            {"group", q.group},
            {"bits", q.bits},
            {"bytes_per_token", qr.bytes_per_token},
            {"data_bytes_per_token", qr.data_bytes_per_token},
            {"scale_bytes_per_token", qr.scale_bytes_per_token},
            {"bytes_per_token_unquantized", qr.bytes_per_token_unquantized},
            {"compression", qr.compression},
            {"residual_tokens", qr.residual_tokens},
            {"residual_bytes", qr.residual_bytes}};
  absl::StrAppendFormat(&r.text,
                        "data              = 2 x %d layers x %d heads x %d dims x %d bits / 8 = "
                        "%s\n",
                        d.model.AttentionLayers(), d.model.num_kv_heads, d.model.head_dim, q.bits,
                        Bytes(qr.data_bytes_per_token));
  absl::StrAppendFormat(&r.text, "scales            = K %s, V %s, group %d, %g-byte scale%s = %s\n",
                        q.k_per_channel ? "per channel" : "per token",
                        q.v_per_channel ? "per channel" : "per token", q.group, q.scale_bytes,
                        q.zero_point ? " + zero point" : "", Bytes(qr.scale_bytes_per_token));
  absl::StrAppendFormat(&r.text, "bytes per token   = %s (%.2fx smaller than %s)\n",
                        Bytes(qr.bytes_per_token), qr.compression, KvElement(d));
  absl::StrAppendFormat(&r.text,
                        "residual          = up to %d newest tokens stay unquantized until their "
                        "group fills: %s per request\n",
                        qr.residual_tokens, Bytes(qr.residual_bytes));
  return r;
}

absl::StatusOr<Report> Fp8Report(const Deployment& d, const std::string& format, double scale,
                                 const std::vector<double>& amax) {
  ASSIGN_OR_RETURN(costmodel::Fp8Report f, costmodel::EvaluateFp8(d, format, scale, amax));
  Report r;
  r.json = {{"inputs", DeploymentJson(d)},
            {"format", format},
            {"scale", scale},
            {"bytes_per_token_bf16", f.bytes_per_token_bf16},
            {"bytes_per_token_fp8", f.bytes_per_token_fp8},
            {"bytes_saved_per_token", f.bytes_saved_per_token},
            {"saturation_threshold", f.saturation_threshold},
            {"samples", f.samples},
            {"clip_rate", f.clip_rate}};
  absl::StrAppendFormat(&r.text, "bytes per token   = %s (bf16) -> %s (fp8): %s saved\n",
                        Bytes(f.bytes_per_token_bf16), Bytes(f.bytes_per_token_fp8),
                        Bytes(f.bytes_saved_per_token));
  absl::StrAppendFormat(&r.text, "saturation        = %s max x scale %g = %g\n", format, scale,
                        f.saturation_threshold);
  absl::StrAppendFormat(&r.text, "clip rate         = %.6f of %d amax samples\n", f.clip_rate,
                        f.samples);
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
