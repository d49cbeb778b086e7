// Reads a Hugging Face config.json into a ModelSpec. Field mapping (see
// docs/planner.md, "Model configs"):
//   num_hidden_layers, hidden_size, num_attention_heads, vocab_size: required
//   num_key_value_heads (default: num_attention_heads), head_dim (default:
//   hidden_size / num_attention_heads), intermediate_size, tie_word_embeddings,
//   torch_dtype or dtype (bytes per weight; quantization_config.quant_method
//   "fp8" makes it 1), q_lora_rank, kv_lora_rank,
//   qk_rope_head_dim, qk_nope_head_dim, v_head_dim (MLA when kv_lora_rank is
//   set), n_routed_experts | num_local_experts | num_experts,
//   num_experts_per_tok, moe_intermediate_size, n_shared_experts,
//   first_k_dense_replace, expert_layer_period / expert_layer_offset (Jamba),
//   sliding_window (+ use_sliding_window), layer_types or layers_block_type,
//   and Mamba-2 fields mamba_d_state | ssm_state_size | state_size,
//   mamba_d_conv | conv_kernel, mamba_n_heads | mamba_num_heads,
//   mamba_d_head | mamba_head_dim, mamba_n_groups | n_groups.
// Hybrid families (hf_hybrid_layers.h), when there is no layer list:
//   Gemma 3 sliding_window_pattern | _sliding_window_pattern; Qwen3-Next
//   full_attention_interval with the gated-delta-net state linear_num_key_heads,
//   linear_num_value_heads, linear_key_head_dim, linear_value_head_dim,
//   linear_conv_kernel_dim; Nemotron-H hybrid_override_pattern (M Mamba-2,
//   * attention, - MLP; attention_head_dim, expand); Jamba attn_layer_period
//   + attn_layer_offset with Mamba v1 layers (mamba_expand, mamba_d_state,
//   mamba_d_conv, mamba_dt_rank). model_type "mamba2" (Mamba2Config: num_heads,
//   head_dim, state_size, n_groups, conv_kernel, expand) is a pure Mamba-2
//   model with no attention layers and no attention fields.
// A multimodal config's "text_config" is used when the top level has no
// num_hidden_layers (Gemma 3). Null fields count as missing.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_HF_CONFIG_H_
#define KVTIER_COSTMODEL_HF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "costmodel/model_spec.h"

namespace kvtier::costmodel {

// INVALID_ARGUMENT naming the field for malformed JSON, a missing required
// field, a field of the wrong type or an inconsistent shape.
absl::StatusOr<ModelSpec> ModelSpecFromHfConfig(absl::string_view json_text,
                                                absl::string_view name);

// Reads the file first; NOT_FOUND if it cannot be read.
absl::StatusOr<ModelSpec> ModelSpecFromHfConfigFile(const std::string& path);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_HF_CONFIG_H_
