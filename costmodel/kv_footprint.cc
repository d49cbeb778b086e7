#include "costmodel/kv_footprint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace kvtier::costmodel {
namespace {

// KV bytes per token per GPU of one attention layer.
double LayerBytesPerTokenPerGpu(const Deployment& d) {
  const ModelSpec& m = d.model;
  if (m.mla.has_value()) {
    return (m.mla->kv_lora_rank + m.mla->qk_rope_head_dim) * d.kv_bytes_per_element;
  }
  const double heads = m.num_kv_heads >= d.tp ? static_cast<double>(m.num_kv_heads) / d.tp : 1.0;
  return 2 * heads * m.head_dim * d.kv_bytes_per_element;
}

double LayerBytesPerTokenUnique(const Deployment& d) {
  const ModelSpec& m = d.model;
  if (m.mla.has_value()) return LayerBytesPerTokenPerGpu(d);
  return 2.0 * m.num_kv_heads * m.head_dim * d.kv_bytes_per_element;
}

}  // namespace

KvFootprint ComputeKvFootprint(const Deployment& d) {
  const ModelSpec& m = d.model;
  KvFootprint f;
  const double per_layer_gpu = LayerBytesPerTokenPerGpu(d);
  const uint32_t attn = m.AttentionLayers();
  f.bytes_per_token = LayerBytesPerTokenUnique(d) * attn;
  f.bytes_per_token_per_gpu = per_layer_gpu * attn;
  if (attn == 0) {
    f.kv_heads_per_gpu = 0;  // no KV cache: nothing to shard or replicate
  } else if (m.mla.has_value()) {
    f.kv_heads_per_gpu = 1;
    f.replication = d.tp;
    if (d.tp > 1) {
      f.alternative = absl::StrCat(
          "MLA caches one latent that every TP rank holds whole: use data-parallel attention "
          "(each of the ",
          d.tp,
          " ranks attends for its own requests, e.g. SGLang "
          "--enable-dp-attention) with TP/EP only for the MLP and experts");
    }
  } else {
    f.kv_heads_per_gpu = m.num_kv_heads >= d.tp ? static_cast<double>(m.num_kv_heads) / d.tp : 1.0;
    f.replication = d.tp > m.num_kv_heads ? static_cast<double>(d.tp) / m.num_kv_heads : 1.0;
    if (f.replication > 1) {
      f.alternative =
          absl::StrCat("TP ", m.num_kv_heads, " (the KV head count) x ", d.tp / m.num_kv_heads,
                       " data-parallel replicas, or TP ", m.num_kv_heads, " x PP ",
                       d.tp / m.num_kv_heads, ": no KV head is stored twice");
    }
  }
  f.duplicate_bytes_per_token = f.bytes_per_token_per_gpu * d.tp - f.bytes_per_token;
  f.bytes_per_block_per_gpu = f.bytes_per_token_per_gpu * d.block_tokens;
  for (const LayerGroup& g : m.EffectiveGroups()) {
    const bool attends = g.kind == LayerKind::kFullAttention || g.kind == LayerKind::kSlidingWindow;
    f.groups.push_back({g, attends ? per_layer_gpu * g.layers : 0.0});
  }
  const StatePlan state = PlanState(d, d.block_tokens, 0);
  f.recurrent_state_bytes_per_request = state.state_bytes_per_request;
  f.recurrent_state_bytes_per_request_per_gpu = state.state_bytes_per_request / d.tp;
  return f;
}

double KvBytesPerGpuAtContext(const Deployment& d, double n) {
  const KvFootprint f = ComputeKvFootprint(d);
  double bytes = f.recurrent_state_bytes_per_request_per_gpu;
  for (const GroupFootprint& g : f.groups) {
    const double tokens =
        g.group.kind == LayerKind::kSlidingWindow ? std::min<double>(g.group.window, n) : n;
    bytes += g.bytes_per_token_per_gpu * tokens;
  }
  return bytes;
}

double SlidingWindowSaving(const Deployment& d, double n) {
  if (n <= 0) return 0;
  const KvFootprint f = ComputeKvFootprint(d);
  if (f.bytes_per_token_per_gpu <= 0) return 0;
  double saving = 0;
  for (const GroupFootprint& g : f.groups) {
    if (g.group.kind != LayerKind::kSlidingWindow) continue;
    const double share = g.bytes_per_token_per_gpu / f.bytes_per_token_per_gpu;
    saving += share * (1 - std::min<double>(g.group.window, n) / n);
  }
  return saving;
}

double LongestRequestTokens(const Deployment& d, double budget_bytes) {
  const KvFootprint f = ComputeKvFootprint(d);
  double growing = 0;  // bytes per token that never stop growing
  for (const GroupFootprint& g : f.groups) {
    if (g.group.kind == LayerKind::kFullAttention) growing += g.bytes_per_token_per_gpu;
  }
  if (KvBytesPerGpuAtContext(d, d.block_tokens) > budget_bytes) return 0;
  if (growing <= 0) return std::numeric_limits<double>::infinity();
  // Whole blocks: lo fits, hi does not.
  const double b = d.block_tokens;
  // Blocks fit: lo does, hi does not. Bytes grow at least `growing` per
  // token, so hi starts at the budget's worth of growing tokens (+1), capped
  // to stay an exact integer in a double.
  uint64_t lo = 1;
  uint64_t hi = static_cast<uint64_t>(std::min(std::ceil(budget_bytes / growing / b) + 1, 9.0e15));
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (KvBytesPerGpuAtContext(d, static_cast<double>(mid) * b) <= budget_bytes) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return static_cast<double>(lo) * b;
}

BlockSizeReport BlockSize(const Deployment& d, double mean_tokens) {
  BlockSizeReport r;
  const double b = d.block_tokens;
  r.max_waste_tokens_per_sequence = b - 1;
  r.max_waste_fraction = mean_tokens > 0 ? std::min(1.0, (b - 1) / mean_tokens) : 0;
  r.blocks_per_sequence = std::ceil(mean_tokens / b);
  r.bytes_per_block_per_gpu = ComputeKvFootprint(d).bytes_per_block_per_gpu;
  r.prefix_match_granularity_tokens = b;
  return r;
}

StatePlan PlanState(const Deployment& d, uint64_t checkpoint_interval, double context_tokens) {
  StatePlan p;
  const ModelSpec& m = d.model;
  p.recurrent_layers = m.LayersOf(LayerKind::kRecurrent);
  if (m.recurrent.has_value() && p.recurrent_layers > 0) {
    const RecurrentShape& r = *m.recurrent;
    const double sb = m.state_bytes_per_element;
    const double inner = static_cast<double>(r.heads) * r.head_dim;
    p.ssm_state_bytes_per_layer = inner * r.state_size * sb;
    p.conv_state_bytes_per_layer =
        (r.conv_kernel - 1.0) * (inner + 2.0 * r.groups * r.state_size) * sb;
  }
  p.state_bytes_per_request =
      p.recurrent_layers * (p.ssm_state_bytes_per_layer + p.conv_state_bytes_per_layer);
  p.state_bytes_per_checkpoint = p.state_bytes_per_request;
  const uint64_t interval = checkpoint_interval == 0 ? d.block_tokens : checkpoint_interval;
  // Without recurrent layers any block boundary restores.
  p.restart_boundary_tokens =
      p.recurrent_layers == 0 ? d.block_tokens : std::lcm<uint64_t>(d.block_tokens, interval);
  p.checkpoints_at_context = std::floor(context_tokens / static_cast<double>(interval));
  p.checkpoint_bytes_at_context = p.checkpoints_at_context * p.state_bytes_per_checkpoint;
  return p;
}

}  // namespace kvtier::costmodel
