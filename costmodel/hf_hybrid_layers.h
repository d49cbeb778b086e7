// Internal to the Hugging Face config.json reader (hf_config.cc): the fields
// of the hybrid model families that say which layers attend and what their
// recurrent layers hold. Field mapping in docs/planner.md, "Model configs".
//
//   Gemma 3      sliding_window_pattern | _sliding_window_pattern P: layer i
//                is full attention when (i + 1) % P == 0, else sliding.
//   Qwen3-Next   full_attention_interval I: layer i is full attention when
//                (i + 1) % I == 0, else a gated-delta-net (recurrent) layer;
//                linear_num_key_heads, linear_num_value_heads,
//                linear_key_head_dim, linear_value_head_dim,
//                linear_conv_kernel_dim give its state.
//   Nemotron-H   hybrid_override_pattern, one letter per layer: M Mamba-2,
//                * attention, - MLP only.
//   Jamba        attn_layer_period P, attn_layer_offset O: layer i attends
//                when i % P == O, else Mamba (v1) with d_inner =
//                mamba_expand * hidden_size, mamba_d_state, mamba_d_conv,
//                mamba_dt_rank.
//   Mamba-2      model_type "mamba2" (Mamba2Config): every layer recurrent,
//                num_heads, head_dim, state_size, n_groups, conv_kernel,
//                expand; no attention fields.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_HF_HYBRID_LAYERS_H_
#define KVTIER_COSTMODEL_HF_HYBRID_LAYERS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "costmodel/hf_fields.h"
#include "costmodel/model_spec.h"

namespace kvtier::costmodel::hf_internal {

struct LayerPattern {
  std::vector<LayerKind> kinds;      // one per layer, in model order
  bool separate_mlp_layers = false;  // Nemotron-H: "-" layers hold the MLPs
  bool gated_mlp = true;             // Nemotron-H: false (relu2, up + down)
};

// For a config without layer_types / layers_block_type: the layer kinds from
// the first present of hybrid_override_pattern, attn_layer_period,
// full_attention_interval, sliding_window_pattern (| _sliding_window_pattern);
// nullopt when none is present. INVALID_ARGUMENT naming the field for a
// period of 0, an offset past the period, an unknown pattern letter or a
// pattern whose length is not `layers`.
absl::StatusOr<std::optional<LayerPattern>> PatternLayers(const Fields& f, uint32_t layers);

// The recurrent shape of a Qwen3-Next config (any linear_* state field
// present: all five required, > 0) or a Jamba config (mamba_expand present
// and no mamba_n_heads | mamba_num_heads: Mamba v1); nullopt otherwise (the
// Mamba-2 aliases apply).
absl::StatusOr<std::optional<RecurrentShape>> FamilyRecurrentShape(const Fields& f,
                                                                   uint32_t hidden);

// When `key` (an expansion factor) is present: INVALID_ARGUMENT naming it
// unless key * hidden == r.heads * r.head_dim.
absl::Status CheckExpand(const Fields& f, const char* key, uint32_t hidden,
                         const RecurrentShape& r);

// model_type is "mamba2".
bool IsPureMamba2(const Fields& f);

// A Mamba2Config: every layer recurrent, no attention and no MLP layers
// (num_attention_heads 0; num_kv_heads 1 so no later division sees 0).
absl::StatusOr<ModelSpec> PureMamba2Spec(const Fields& f, absl::string_view name);

}  // namespace kvtier::costmodel::hf_internal

#endif  // KVTIER_COSTMODEL_HF_HYBRID_LAYERS_H_
