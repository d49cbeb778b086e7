#include "costmodel/model_spec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvtier::costmodel {

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kFullAttention:
      return "full_attention";
    case LayerKind::kSlidingWindow:
      return "sliding_window";
    case LayerKind::kRecurrent:
      return "recurrent";
    case LayerKind::kMlpOnly:
      return "mlp_only";
  }
  return "unknown";
}

std::vector<LayerGroup> ModelSpec::EffectiveGroups() const {
  if (!groups.empty()) return groups;
  return {LayerGroup{LayerKind::kFullAttention, num_layers, 0}};
}

uint32_t ModelSpec::LayersOf(LayerKind kind) const {
  uint32_t n = 0;
  for (const LayerGroup& g : EffectiveGroups()) {
    if (g.kind == kind) n += g.layers;
  }
  return n;
}

uint32_t ModelSpec::AttentionLayers() const {
  return LayersOf(LayerKind::kFullAttention) + LayersOf(LayerKind::kSlidingWindow);
}

absl::Status ModelSpec::Validate() const {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", name, "': ", what));
  };
  if (num_layers == 0) return bad("num_hidden_layers must be > 0");
  if (hidden_size == 0) return bad("hidden_size must be > 0");
  if (vocab_size == 0) return bad("vocab_size must be > 0");
  if (!(weight_bytes_per_param > 0)) return bad("weight bytes per parameter must be > 0");
  uint64_t sum = 0;
  for (const LayerGroup& g : groups) {
    sum += g.layers;
    if (g.kind == LayerKind::kSlidingWindow && g.window == 0) {
      return bad("a sliding-window layer group needs sliding_window > 0");
    }
  }
  if (!groups.empty() && sum != num_layers) {
    return bad(
        absl::StrCat("layer groups cover ", sum, " layers, num_hidden_layers is ", num_layers));
  }
  if (!mla.has_value() && num_kv_heads == 0) return bad("num_key_value_heads must be > 0");
  if (AttentionLayers() > 0) {
    if (num_attention_heads == 0) return bad("num_attention_heads must be > 0");
    if (mla.has_value()) {
      if (mla->kv_lora_rank == 0 || mla->qk_rope_head_dim == 0 || mla->qk_nope_head_dim == 0 ||
          mla->v_head_dim == 0) {
        return bad(
            "an MLA model needs kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and "
            "v_head_dim > 0");
      }
    } else {
      if (num_kv_heads == 0) return bad("num_key_value_heads must be > 0");
      if (head_dim == 0) return bad("head_dim must be > 0");
      if (num_attention_heads % num_kv_heads != 0) {
        return bad(absl::StrCat("num_attention_heads (", num_attention_heads,
                                ") is not a multiple of num_key_value_heads (", num_kv_heads, ")"));
      }
    }
  }
  if (LayersOf(LayerKind::kRecurrent) > 0) {
    if (!recurrent.has_value() || recurrent->state_size == 0 || recurrent->conv_kernel == 0 ||
        recurrent->heads == 0 || recurrent->head_dim == 0 ||
        (recurrent->groups == 0 && recurrent->mixer != RecurrentMixer::kMamba1)) {
      return bad("recurrent layers need state size, conv kernel, heads, head dim and groups > 0");
    }
  }
  if (moe.has_value()) {
    if (moe->routed_experts == 0 || moe->experts_per_token == 0 ||
        moe->expert_intermediate_size == 0) {
      return bad(
          "a mixture-of-experts model needs experts, experts per token and an expert "
          "intermediate size > 0");
    }
    if (moe->experts_per_token > moe->routed_experts) {
      return bad("num_experts_per_tok exceeds the number of routed experts");
    }
    if (moe->layer_period == 0 || moe->layer_offset >= moe->layer_period) {
      return bad("expert_layer_offset must be < expert_layer_period");
    }
    if (moe->first_dense_layers > num_layers) {
      return bad("first_k_dense_replace exceeds num_hidden_layers");
    }
    if ((moe->first_dense_layers > 0 || moe->layer_period > 1) && intermediate_size == 0) {
      return bad("dense layers need intermediate_size > 0");
    }
  } else if (intermediate_size == 0 &&
             (!separate_mlp_layers || LayersOf(LayerKind::kMlpOnly) > 0)) {
    return bad("intermediate_size must be > 0");
  }
  if (total_params_override.has_value() && !(*total_params_override > 0)) {
    return bad("the total parameter override must be > 0");
  }
  if (active_params_override.has_value() && !(*active_params_override > 0)) {
    return bad("the active parameter override must be > 0");
  }
  return absl::OkStatus();
}

ParameterCounts ModelSpec::ComputedParameters() const {
  const double h = hidden_size;
  double attention = 0;  // per attention layer
  if (mla.has_value()) {
    const double heads = num_attention_heads;
    const double qk = mla->qk_nope_head_dim + mla->qk_rope_head_dim;
    const double q = mla->q_lora_rank > 0
                         ? h * mla->q_lora_rank + mla->q_lora_rank + mla->q_lora_rank * heads * qk
                         : h * heads * qk;
    const double kv_a = h * (mla->kv_lora_rank + mla->qk_rope_head_dim) + mla->kv_lora_rank;
    const double kv_b =
        static_cast<double>(mla->kv_lora_rank) * heads * (mla->qk_nope_head_dim + mla->v_head_dim);
    const double o = heads * mla->v_head_dim * h;
    attention = q + kv_a + kv_b + o;
  } else {
    const double q = static_cast<double>(num_attention_heads) * head_dim;
    const double kv = static_cast<double>(num_kv_heads) * head_dim;
    attention = h * q + 2 * h * kv + q * h;
  }
  double mixer_recurrent = 0;  // per recurrent layer
  if (recurrent.has_value()) {
    const RecurrentShape& r = *recurrent;
    const double inner = static_cast<double>(r.heads) * r.head_dim;
    const double bc = 2.0 * r.groups * r.state_size;
    switch (r.mixer) {
      case RecurrentMixer::kMamba2:
        mixer_recurrent = h * (2 * inner + bc + r.heads) + (inner + bc) * r.conv_kernel +
                          3.0 * r.heads + inner + inner * h;
        break;
      case RecurrentMixer::kMamba1: {
        // in_proj (x, z), conv, x_proj (dt, B, C), dt_proj, A_log, D, out_proj.
        const double n = r.state_size, rank = r.dt_rank;
        mixer_recurrent = h * 2 * inner + inner * r.conv_kernel + inner * (rank + 2 * n) +
                          rank * inner + inner * n + inner + inner * h;
        break;
      }
      case RecurrentMixer::kGatedDeltaNet:
        // in_proj_qkvz, in_proj_ba, conv over q, k, v, A_log + dt_bias,
        // gated norm (one value head), out_proj.
        mixer_recurrent = h * (bc + 2 * inner + 2.0 * r.heads) + (bc + inner) * r.conv_kernel +
                          2.0 * r.heads + r.head_dim + inner * h;
        break;
    }
  }
  const double dense_mlp = (gated_mlp ? 3 : 2) * h * intermediate_size;
  double moe_total = 0, moe_active = 0;  // per MoE layer
  uint32_t moe_layers = 0;
  if (moe.has_value() && !separate_mlp_layers) {
    const double expert = 3 * h * moe->expert_intermediate_size;
    const double router = h * moe->routed_experts;
    moe_total = expert * (moe->routed_experts + moe->shared_experts) + router;
    moe_active = expert * (moe->experts_per_token + moe->shared_experts) + router;
    for (uint32_t i = moe->first_dense_layers; i < num_layers; ++i) {
      if (i % moe->layer_period == moe->layer_offset) ++moe_layers;
    }
  }
  const double norms = (separate_mlp_layers ? 1 : 2) * h * num_layers + h;
  const double embedding = static_cast<double>(vocab_size) * h;
  const double lm_head = tie_word_embeddings ? 0 : embedding;
  const double mixers =
      attention * AttentionLayers() + mixer_recurrent * LayersOf(LayerKind::kRecurrent);
  const double dense_layers =
      separate_mlp_layers ? LayersOf(LayerKind::kMlpOnly) : num_layers - moe_layers;
  ParameterCounts c;
  c.total =
      embedding + lm_head + norms + mixers + dense_mlp * dense_layers + moe_total * moe_layers;
  c.active = (tie_word_embeddings ? embedding : lm_head) + norms + mixers +
             dense_mlp * dense_layers + moe_active * moe_layers;
  return c;
}

ModelSpec DenseModel(std::string name, uint32_t layers, uint32_t hidden, uint32_t heads,
                     uint32_t kv_heads, uint32_t head_dim, uint32_t intermediate, uint32_t vocab,
                     bool tied) {
  ModelSpec m;
  m.name = std::move(name);
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.intermediate_size = intermediate;
  m.vocab_size = vocab;
  m.tie_word_embeddings = tied;
  return m;
}

ParameterCounts ModelSpec::Parameters() const {
  ParameterCounts c = ComputedParameters();
  if (total_params_override.has_value()) c.total = *total_params_override;
  if (active_params_override.has_value()) c.active = *active_params_override;
  const double head = static_cast<double>(vocab_size) * hidden_size;
  c.prefill = std::max(c.active - head, 0.5 * c.active);
  return c;
}

}  // namespace kvtier::costmodel
