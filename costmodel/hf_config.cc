#include "costmodel/hf_config.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "costmodel/hf_fields.h"
#include "costmodel/hf_hybrid_layers.h"
#include "nlohmann/json.hpp"

namespace kvtier::costmodel {
namespace {

using hf_internal::DtypeBytes;
using hf_internal::Fields;
using nlohmann::json;

#define KVTIER_ASSIGN_OR_RETURN(lhs, expr)      \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

absl::StatusOr<LayerKind> KindOf(const std::string& type) {
  if (type == "full_attention" || type == "attention") return LayerKind::kFullAttention;
  if (type == "sliding_attention" || type == "sliding_window") return LayerKind::kSlidingWindow;
  if (type == "mamba" || type == "mamba2" || type == "recurrent" || type == "linear_attention") {
    return LayerKind::kRecurrent;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("config.json: layer type '", type,
                   "' is not one of full_attention, attention, "
                   "sliding_attention, mamba, mamba2, recurrent, linear_attention"));
}

absl::StatusOr<ModelSpec> Parse(const json& root, absl::string_view name) {
  if (!root.is_object()) {
    return absl::InvalidArgumentError("config.json: the top level must be a JSON object");
  }
  const json& obj = (!root.contains("num_hidden_layers") && root.contains("text_config") &&
                     root.at("text_config").is_object())
                        ? root.at("text_config")
                        : root;
  Fields f(obj);
  if (hf_internal::IsPureMamba2(f)) return hf_internal::PureMamba2Spec(f, name);
  ModelSpec m;
  m.name = std::string(name);
  KVTIER_ASSIGN_OR_RETURN(layers, f.RequiredUint("num_hidden_layers"));
  KVTIER_ASSIGN_OR_RETURN(hidden, f.RequiredUint("hidden_size"));
  KVTIER_ASSIGN_OR_RETURN(heads, f.RequiredUint("num_attention_heads"));
  KVTIER_ASSIGN_OR_RETURN(vocab, f.RequiredUint("vocab_size"));
  KVTIER_ASSIGN_OR_RETURN(kv_heads, f.Uint("num_key_value_heads"));
  // Nemotron-H names the attention head size attention_head_dim.
  KVTIER_ASSIGN_OR_RETURN(head_dim, f.Has("head_dim") || !f.Has("hybrid_override_pattern")
                                        ? f.Uint("head_dim")
                                        : f.Uint("attention_head_dim"));
  KVTIER_ASSIGN_OR_RETURN(intermediate, f.Uint("intermediate_size"));
  KVTIER_ASSIGN_OR_RETURN(tied, f.Bool("tie_word_embeddings"));
  KVTIER_ASSIGN_OR_RETURN(torch_dtype, f.String("torch_dtype"));
  KVTIER_ASSIGN_OR_RETURN(new_dtype, f.String("dtype"));  // newer transformers
  const std::optional<std::string> dtype = torch_dtype.has_value() ? torch_dtype : new_dtype;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.vocab_size = vocab;
  m.num_kv_heads = kv_heads.value_or(heads);
  if (heads == 0) return absl::InvalidArgumentError("config.json: num_attention_heads is 0");
  m.head_dim = head_dim.value_or(hidden / heads);
  m.intermediate_size = intermediate.value_or(0);
  m.tie_word_embeddings = tied.value_or(false);
  KVTIER_ASSIGN_OR_RETURN(wbytes, DtypeBytes(dtype));
  m.weight_bytes_per_param = wbytes;
  m.state_bytes_per_element = std::max(2.0, wbytes);
  // FP8 checkpoints (DeepSeek-V3) say so in quantization_config.
  const json& qc_holder = obj.contains("quantization_config") ? obj : root;
  if (qc_holder.contains("quantization_config") &&
      qc_holder.at("quantization_config").is_object()) {
    const json& q = qc_holder.at("quantization_config");
    if (q.contains("quant_method") && q.at("quant_method") == "fp8") {
      m.weight_bytes_per_param = 1;
    }
  }

  KVTIER_ASSIGN_OR_RETURN(kv_lora, f.Uint("kv_lora_rank"));
  if (kv_lora.has_value() && *kv_lora > 0) {
    MlaShape mla;
    mla.kv_lora_rank = *kv_lora;
    KVTIER_ASSIGN_OR_RETURN(q_lora, f.Uint("q_lora_rank"));
    KVTIER_ASSIGN_OR_RETURN(rope, f.Uint("qk_rope_head_dim"));
    KVTIER_ASSIGN_OR_RETURN(nope, f.Uint("qk_nope_head_dim"));
    KVTIER_ASSIGN_OR_RETURN(v_dim, f.Uint("v_head_dim"));
    mla.q_lora_rank = q_lora.value_or(0);
    mla.qk_rope_head_dim = rope.value_or(0);
    mla.qk_nope_head_dim = nope.value_or(0);
    mla.v_head_dim = v_dim.value_or(0);
    m.mla = mla;
    m.num_kv_heads = heads;
    m.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
  }

  KVTIER_ASSIGN_OR_RETURN(experts,
                          f.UintAny({"n_routed_experts", "num_local_experts", "num_experts"}));
  if (experts.has_value() && *experts > 0) {
    MoeShape moe;
    moe.routed_experts = *experts;
    KVTIER_ASSIGN_OR_RETURN(per_tok, f.Uint("num_experts_per_tok"));
    KVTIER_ASSIGN_OR_RETURN(moe_inter, f.Uint("moe_intermediate_size"));
    KVTIER_ASSIGN_OR_RETURN(shared, f.Uint("n_shared_experts"));
    KVTIER_ASSIGN_OR_RETURN(first_dense, f.Uint("first_k_dense_replace"));
    moe.experts_per_token = per_tok.value_or(0);
    moe.expert_intermediate_size = moe_inter.value_or(m.intermediate_size);
    moe.shared_experts = shared.value_or(0);
    moe.first_dense_layers = first_dense.value_or(0);
    KVTIER_ASSIGN_OR_RETURN(moe_period, f.Uint("expert_layer_period"));  // Jamba
    KVTIER_ASSIGN_OR_RETURN(moe_offset, f.Uint("expert_layer_offset"));
    moe.layer_period = moe_period.value_or(1);
    moe.layer_offset = moe_offset.value_or(0);
    m.moe = moe;
  }

  KVTIER_ASSIGN_OR_RETURN(window, f.Uint("sliding_window"));
  KVTIER_ASSIGN_OR_RETURN(use_window, f.Bool("use_sliding_window"));
  KVTIER_ASSIGN_OR_RETURN(types, f.StringList("layer_types"));
  if (!types.has_value()) {
    KVTIER_ASSIGN_OR_RETURN(block_types, f.StringList("layers_block_type"));
    types = block_types;
  }
  std::optional<std::vector<LayerKind>> kinds;
  if (types.has_value()) {
    if (types->size() != layers) {
      return absl::InvalidArgumentError(absl::StrCat("config.json: layer_types lists ",
                                                     types->size(),
                                                     " layers, num_hidden_layers is ", layers));
    }
    kinds.emplace();
    for (const std::string& t : *types) {
      KVTIER_ASSIGN_OR_RETURN(kind, KindOf(t));
      kinds->push_back(kind);
    }
  } else {
    // Gemma 3, Qwen3-Next, Nemotron-H, Jamba: a pattern field instead.
    KVTIER_ASSIGN_OR_RETURN(pattern, hf_internal::PatternLayers(f, layers));
    if (pattern.has_value()) {
      kinds = std::move(pattern->kinds);
      m.separate_mlp_layers = pattern->separate_mlp_layers;
      m.gated_mlp = pattern->gated_mlp;
    }
  }
  if (kinds.has_value()) {
    // One group per caching rule, in order of first appearance.
    for (LayerKind kind : *kinds) {
      auto it = std::find_if(m.groups.begin(), m.groups.end(),
                             [&](const LayerGroup& g) { return g.kind == kind; });
      if (it == m.groups.end()) {
        m.groups.push_back({kind, 1, kind == LayerKind::kSlidingWindow ? window.value_or(0) : 0});
      } else {
        ++it->layers;
      }
    }
  } else if (window.has_value() && *window > 0 && use_window.value_or(true)) {
    // Mistral style: every layer uses the window.
    m.groups.push_back({LayerKind::kSlidingWindow, layers, *window});
  }

  if (m.LayersOf(LayerKind::kRecurrent) > 0) {
    KVTIER_ASSIGN_OR_RETURN(family, hf_internal::FamilyRecurrentShape(f, hidden));
    if (family.has_value()) {
      m.recurrent = *family;  // Qwen3-Next gated delta net, Jamba Mamba v1
    } else {
      RecurrentShape r;
      KVTIER_ASSIGN_OR_RETURN(state, f.UintAny({"mamba_d_state", "ssm_state_size", "state_size"}));
      KVTIER_ASSIGN_OR_RETURN(conv, f.UintAny({"mamba_d_conv", "conv_kernel"}));
      KVTIER_ASSIGN_OR_RETURN(rheads, f.UintAny({"mamba_n_heads", "mamba_num_heads"}));
      KVTIER_ASSIGN_OR_RETURN(rdim, f.UintAny({"mamba_d_head", "mamba_head_dim"}));
      KVTIER_ASSIGN_OR_RETURN(rgroups, f.UintAny({"mamba_n_groups", "n_groups"}));
      r.state_size = state.value_or(0);
      r.conv_kernel = conv.value_or(0);
      r.heads = rheads.value_or(0);
      r.head_dim = rdim.value_or(0);
      r.groups = rgroups.value_or(0);
      if (f.Has("hybrid_override_pattern")) {
        RETURN_IF_ERROR(hf_internal::CheckExpand(f, "expand", hidden, r));  // Nemotron-H
      }
      m.recurrent = r;
    }
  }
  RETURN_IF_ERROR(m.Validate());
  return m;
}

#undef KVTIER_ASSIGN_OR_RETURN

}  // namespace

absl::StatusOr<ModelSpec> ModelSpecFromHfConfig(absl::string_view json_text,
                                                absl::string_view name) {
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError("config.json: not valid JSON");
  }
  return Parse(root, name);
}

absl::StatusOr<ModelSpec> ModelSpecFromHfConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read model config '", path, "'"));
  std::stringstream buf;
  buf << in.rdbuf();
  absl::StatusOr<ModelSpec> m = ModelSpecFromHfConfig(buf.str(), path);
  if (!m.ok()) {
    return absl::Status(m.status().code(), absl::StrCat(path, ": ", m.status().message()));
  }
  return m;
}

}  // namespace kvtier::costmodel
