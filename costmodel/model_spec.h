// ModelSpec: the shape of a transformer (or hybrid) model as far as the KV
// cache and the cost of recomputing a prefix are concerned, and the parameter
// counts derived from it.
//
// A spec comes from the built-in catalog (catalog.h) or from a Hugging Face
// config.json (hf_config.h). Parameter counts follow one documented formula
// (docs/planner.md, "Parameter counts"); either count can be overridden.
//
// Thread-safety: plain values; const methods are safe to call concurrently.
#ifndef KVTIER_COSTMODEL_MODEL_SPEC_H_
#define KVTIER_COSTMODEL_MODEL_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kvtier::costmodel {

// How a group of layers caches: every token (full attention), only the last
// `window` tokens (sliding window), a fixed-size state (recurrent), or
// nothing (kMlpOnly: a layer that is only an MLP, Nemotron-H's "-").
enum class LayerKind : uint8_t { kFullAttention, kSlidingWindow, kRecurrent, kMlpOnly };

const char* LayerKindName(LayerKind kind);

struct LayerGroup {
  LayerKind kind = LayerKind::kFullAttention;
  uint32_t layers = 0;
  uint32_t window = 0;  // tokens; only for kSlidingWindow
};

// Multi-head latent attention (DeepSeek-V2/V3): every token caches one
// latent of kv_lora_rank + qk_rope_head_dim elements per layer.
struct MlaShape {
  uint32_t q_lora_rank = 0;  // 0: queries are projected directly
  uint32_t kv_lora_rank = 0;
  uint32_t qk_rope_head_dim = 0;
  uint32_t qk_nope_head_dim = 0;
  uint32_t v_head_dim = 0;
};

// Mixture of experts. Dense layers (the first `first_dense_layers`) use the
// model's intermediate_size; MoE layers have routed experts of
// expert_intermediate_size, `experts_per_token` of them active per token,
// plus `shared_experts` always-active experts of the same size.
struct MoeShape {
  uint32_t routed_experts = 0;
  uint32_t experts_per_token = 0;
  uint32_t shared_experts = 0;
  uint32_t expert_intermediate_size = 0;
  uint32_t first_dense_layers = 0;
  // Of the layers past first_dense_layers, layer i is MoE when
  // i % layer_period == layer_offset (Jamba: every second layer); the
  // defaults make every one MoE.
  uint32_t layer_period = 1;
  uint32_t layer_offset = 0;
};

// The mixer of the recurrent layers; it decides the parameter count (the
// state formula below is the same for all three).
enum class RecurrentMixer : uint8_t {
  kMamba2,         // Mamba-2 / SSD (Nemotron-H, Mamba2Config, Bamba)
  kMamba1,         // Mamba (v1) selective scan (Jamba): heads = d_inner,
                   // head_dim = 1, groups = 0
  kGatedDeltaNet,  // Qwen3-Next linear attention: heads = value heads,
                   // head_dim = value head dim, state_size = key head dim,
                   // groups = key heads
};

// Recurrent layers: per layer and request, an SSM state of
// heads * head_dim * state_size elements and a convolution state of
// (conv_kernel - 1) * (heads * head_dim + 2 * groups * state_size) elements.
// For Mamba-1 (groups 0) that is d_inner * d_state and
// (d_conv - 1) * d_inner; for the gated delta net it is
// v_heads * k_dim * v_dim and (kernel - 1) * (2 * k_heads * k_dim +
// v_heads * v_dim), the q, k, v channels the convolution runs over.
struct RecurrentShape {
  RecurrentMixer mixer = RecurrentMixer::kMamba2;
  uint32_t state_size = 0;
  uint32_t conv_kernel = 0;
  uint32_t heads = 0;
  uint32_t head_dim = 0;
  uint32_t groups = 0;   // > 0 except for Mamba-1
  uint32_t dt_rank = 0;  // Mamba-1 only (parameter count)
};

struct ParameterCounts {
  double total = 0;
  // Parameters multiplied per token: all but the input embedding table and
  // the routed experts a token does not use. 2 * active FLOPs per token.
  double active = 0;
  // Parameters multiplied per prefill token: active minus the LM head, which
  // runs for the last prompt token only (at least half of active, so odd
  // overrides stay sane).
  double prefill = 0;
};

struct ModelSpec {
  std::string name;
  uint32_t hidden_size = 0;
  uint32_t intermediate_size = 0;  // dense MLP (gated: 3 matrices)
  uint32_t vocab_size = 0;
  bool tie_word_embeddings = false;
  double weight_bytes_per_param = 2;   // from torch_dtype; catalog may override
  double state_bytes_per_element = 2;  // recurrent state: torch_dtype, at least 2

  // Attention. num_layers counts every layer (attention and recurrent).
  uint32_t num_layers = 0;
  uint32_t num_attention_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  std::optional<MlaShape> mla;

  std::optional<MoeShape> moe;
  std::optional<RecurrentShape> recurrent;

  // false (the default): every layer carries one MLP and two norms.
  // true: mixers and MLPs are separate layers (Nemotron-H, pure Mamba-2):
  // only kMlpOnly layers carry an MLP, and every layer has one norm.
  bool separate_mlp_layers = false;
  // Dense MLP matrices: 3 (gate, up, down) when true, else 2 (up, down;
  // Nemotron-H's relu2).
  bool gated_mlp = true;

  // Layer groups in model order, summing to num_layers. Empty means every
  // layer is full attention.
  std::vector<LayerGroup> groups;

  // Published counts, for catalog entries (0 = unknown); overrides win over
  // the computed counts when set.
  double published_total_params = 0;
  double published_active_params = 0;
  std::optional<double> total_params_override;
  std::optional<double> active_params_override;

  // INVALID_ARGUMENT naming the first inconsistent field.
  absl::Status Validate() const;

  // Layer groups with the default filled in (one full-attention group).
  std::vector<LayerGroup> EffectiveGroups() const;
  uint32_t LayersOf(LayerKind kind) const;
  uint32_t AttentionLayers() const;  // full + sliding

  // Parameter counts from the shape (overrides applied).
  ParameterCounts Parameters() const;
  // The same, ignoring overrides.
  ParameterCounts ComputedParameters() const;
};

// A full-attention model with a gated dense MLP: the common fields in one
// call (catalog entries and tests start from it).
ModelSpec DenseModel(std::string name, uint32_t layers, uint32_t hidden, uint32_t heads,
                     uint32_t kv_heads, uint32_t head_dim, uint32_t intermediate, uint32_t vocab,
                     bool tied);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_MODEL_SPEC_H_
