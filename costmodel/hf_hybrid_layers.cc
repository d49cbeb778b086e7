#include "costmodel/hf_hybrid_layers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier::costmodel::hf_internal {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: ", what));
}

// Layer i is `hit` when (i + 1) % period == 0, else `other`.
std::vector<LayerKind> EveryNth(uint32_t layers, uint32_t period, LayerKind hit, LayerKind other) {
  std::vector<LayerKind> kinds;
  kinds.reserve(layers);
  for (uint32_t i = 0; i < layers; ++i) kinds.push_back((i + 1) % period == 0 ? hit : other);
  return kinds;
}

absl::StatusOr<LayerPattern> NemotronPattern(const std::string& pattern, uint32_t layers) {
  if (pattern.size() != layers) {
    return Bad(absl::StrCat("hybrid_override_pattern has ", pattern.size(),
                            " layers, num_hidden_layers is ", layers));
  }
  LayerPattern p;
  p.separate_mlp_layers = true;
  p.gated_mlp = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    switch (pattern[i]) {
      case 'M':
        p.kinds.push_back(LayerKind::kRecurrent);
        break;
      case '*':
        p.kinds.push_back(LayerKind::kFullAttention);
        break;
      case '-':
        p.kinds.push_back(LayerKind::kMlpOnly);
        break;
      default:
        return Bad(absl::StrCat("hybrid_override_pattern: layer ", i, " is '",
                                std::string(1, pattern[i]),
                                "', not one of M (Mamba-2), * (attention), - (MLP)"));
    }
  }
  return p;
}

absl::StatusOr<LayerPattern> JambaPattern(const Fields& f, uint32_t period, uint32_t layers) {
  if (period == 0) return Bad("field 'attn_layer_period' must be > 0, got 0");
  ASSIGN_OR_RETURN(uint32_t offset, f.RequiredUint("attn_layer_offset"));
  if (offset >= period) {
    return Bad(absl::StrCat("attn_layer_offset (", offset, ") must be < attn_layer_period (",
                            period, ")"));
  }
  LayerPattern p;
  for (uint32_t i = 0; i < layers; ++i) {
    p.kinds.push_back(i % period == offset ? LayerKind::kFullAttention : LayerKind::kRecurrent);
  }
  return p;
}

}  // namespace

absl::StatusOr<std::optional<LayerPattern>> PatternLayers(const Fields& f, uint32_t layers) {
  ASSIGN_OR_RETURN(std::optional<std::string> hybrid, f.String("hybrid_override_pattern"));
  if (hybrid.has_value()) {
    ASSIGN_OR_RETURN(LayerPattern p, NemotronPattern(*hybrid, layers));
    return std::optional<LayerPattern>(std::move(p));
  }
  ASSIGN_OR_RETURN(std::optional<uint32_t> attn_period, f.Uint("attn_layer_period"));
  if (attn_period.has_value()) {
    ASSIGN_OR_RETURN(LayerPattern p, JambaPattern(f, *attn_period, layers));
    return std::optional<LayerPattern>(std::move(p));
  }
  ASSIGN_OR_RETURN(std::optional<uint32_t> interval, f.Uint("full_attention_interval"));
  if (interval.has_value()) {
    if (*interval == 0) return Bad("field 'full_attention_interval' must be > 0, got 0");
    LayerPattern p;
    p.kinds = EveryNth(layers, *interval, LayerKind::kFullAttention, LayerKind::kRecurrent);
    return std::optional<LayerPattern>(std::move(p));
  }
  const char* key =
      f.Has("sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
  ASSIGN_OR_RETURN(std::optional<uint32_t> every, f.Uint(key));
  if (every.has_value()) {
    if (*every == 0) return Bad(absl::StrCat("field '", key, "' must be > 0, got 0"));
    LayerPattern p;
    p.kinds = EveryNth(layers, *every, LayerKind::kFullAttention, LayerKind::kSlidingWindow);
    return std::optional<LayerPattern>(std::move(p));
  }
  return std::optional<LayerPattern>();
}

absl::StatusOr<std::optional<RecurrentShape>> FamilyRecurrentShape(const Fields& f,
                                                                   uint32_t hidden) {
  static constexpr const char* kLinear[] = {"linear_num_key_heads", "linear_num_value_heads",
                                            "linear_key_head_dim", "linear_value_head_dim",
                                            "linear_conv_kernel_dim"};
  bool any_linear = false;
  for (const char* k : kLinear) any_linear = any_linear || f.Has(k);
  if (any_linear) {
    // Qwen3-Next gated delta net: recurrent state [v_heads, k_dim, v_dim];
    // the convolution runs over q, k (k_heads * k_dim each) and v.
    RecurrentShape r;
    r.mixer = RecurrentMixer::kGatedDeltaNet;
    ASSIGN_OR_RETURN(r.groups, f.RequiredPositive("linear_num_key_heads"));
    ASSIGN_OR_RETURN(r.heads, f.RequiredPositive("linear_num_value_heads"));
    ASSIGN_OR_RETURN(r.state_size, f.RequiredPositive("linear_key_head_dim"));
    ASSIGN_OR_RETURN(r.head_dim, f.RequiredPositive("linear_value_head_dim"));
    ASSIGN_OR_RETURN(r.conv_kernel, f.RequiredPositive("linear_conv_kernel_dim"));
    if (r.heads % r.groups != 0) {
      return Bad(absl::StrCat("linear_num_value_heads (", r.heads,
                              ") is not a multiple of linear_num_key_heads (", r.groups, ")"));
    }
    return std::optional<RecurrentShape>(r);
  }
  if (f.Has("mamba_expand") && !f.Has("mamba_n_heads") && !f.Has("mamba_num_heads")) {
    // Jamba: Mamba (v1) layers of d_inner = mamba_expand * hidden_size.
    RecurrentShape r;
    r.mixer = RecurrentMixer::kMamba1;
    ASSIGN_OR_RETURN(uint32_t expand, f.RequiredPositive("mamba_expand"));
    ASSIGN_OR_RETURN(r.state_size, f.RequiredPositive("mamba_d_state"));
    ASSIGN_OR_RETURN(r.conv_kernel, f.RequiredPositive("mamba_d_conv"));
    r.heads = expand * hidden;
    r.head_dim = 1;
    r.groups = 0;
    // mamba_dt_rank: an integer, or "auto" (the default) = ceil(hidden / 16).
    r.dt_rank = static_cast<uint32_t>(std::ceil(hidden / 16.0));
    if (f.Has("mamba_dt_rank") &&
        !(f.object().at("mamba_dt_rank").is_string() && f.object().at("mamba_dt_rank") == "auto")) {
      ASSIGN_OR_RETURN(r.dt_rank, f.RequiredPositive("mamba_dt_rank"));
    }
    return std::optional<RecurrentShape>(r);
  }
  return std::optional<RecurrentShape>();
}

absl::Status CheckExpand(const Fields& f, const char* key, uint32_t hidden,
                         const RecurrentShape& r) {
  ASSIGN_OR_RETURN(std::optional<double> expand, f.Number(key));
  const double inner = static_cast<double>(r.heads) * r.head_dim;
  if (expand.has_value() && *expand * hidden != inner) {
    return Bad(absl::StrCat("field '", key, "' (", *expand, ") * hidden_size (", hidden,
                            ") is not heads * head_dim (", inner, ")"));
  }
  return absl::OkStatus();
}

bool IsPureMamba2(const Fields& f) {
  return f.Has("model_type") && f.object().at("model_type") == "mamba2";
}

absl::StatusOr<ModelSpec> PureMamba2Spec(const Fields& f, absl::string_view name) {
  ModelSpec m;
  m.name = std::string(name);
  ASSIGN_OR_RETURN(m.num_layers, f.RequiredUint("num_hidden_layers"));
  ASSIGN_OR_RETURN(m.hidden_size, f.RequiredUint("hidden_size"));
  ASSIGN_OR_RETURN(m.vocab_size, f.RequiredUint("vocab_size"));
  ASSIGN_OR_RETURN(std::optional<bool> tied, f.Bool("tie_word_embeddings"));
  m.tie_word_embeddings = tied.value_or(false);
  ASSIGN_OR_RETURN(std::optional<std::string> torch_dtype, f.String("torch_dtype"));
  ASSIGN_OR_RETURN(std::optional<std::string> new_dtype, f.String("dtype"));
  ASSIGN_OR_RETURN(double wbytes, DtypeBytes(torch_dtype.has_value() ? torch_dtype : new_dtype));
  m.weight_bytes_per_param = wbytes;
  m.state_bytes_per_element = std::max(2.0, wbytes);
  // No attention: no query heads; one placeholder KV head (Validate's rule).
  m.num_attention_heads = 0;
  m.num_kv_heads = 1;
  m.head_dim = 0;
  // `intermediate_size`, when present, is the Mamba inner width, not an MLP.
  m.intermediate_size = 0;
  m.separate_mlp_layers = true;  // and there are no MLP layers
  m.groups = {{LayerKind::kRecurrent, m.num_layers, 0}};
  RecurrentShape r;
  ASSIGN_OR_RETURN(r.heads, f.RequiredPositive("num_heads"));
  ASSIGN_OR_RETURN(r.head_dim, f.RequiredPositive("head_dim"));
  ASSIGN_OR_RETURN(r.state_size, f.RequiredPositive("state_size"));
  ASSIGN_OR_RETURN(r.groups, f.RequiredPositive("n_groups"));
  ASSIGN_OR_RETURN(r.conv_kernel, f.RequiredPositive("conv_kernel"));
  if (r.heads % r.groups != 0) {
    return Bad(
        absl::StrCat("num_heads (", r.heads, ") is not a multiple of n_groups (", r.groups, ")"));
  }
  RETURN_IF_ERROR(CheckExpand(f, "expand", m.hidden_size, r));
  m.recurrent = r;
  RETURN_IF_ERROR(m.Validate());
  return m;
}

}  // namespace kvtier::costmodel::hf_internal
