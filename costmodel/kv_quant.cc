#include "costmodel/kv_quant.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "costmodel/kv_footprint.h"

namespace kvtier::costmodel {

absl::StatusOr<Fp8Report> EvaluateFp8(const Deployment& d, absl::string_view format, double scale,
                                      absl::Span<const double> amax_samples) {
  double max_finite = 0;
  if (format == "e4m3") {
    max_finite = 448;
  } else if (format == "e5m2") {
    max_finite = 57344;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("fp8 format '", format, "' is not e4m3 or e5m2"));
  }
  if (!(scale > 0)) return absl::InvalidArgumentError("--scale must be > 0");
  Fp8Report r;
  Deployment bf16 = d, fp8 = d;
  bf16.kv_bytes_per_element = 2;
  fp8.kv_bytes_per_element = 1;
  r.bytes_per_token_bf16 = ComputeKvFootprint(bf16).bytes_per_token;
  r.bytes_per_token_fp8 = ComputeKvFootprint(fp8).bytes_per_token;
  r.bytes_saved_per_token = r.bytes_per_token_bf16 - r.bytes_per_token_fp8;
  r.saturation_threshold = max_finite * scale;
  uint64_t clipped = 0;
  for (double a : amax_samples) {
    if (std::fabs(a) > r.saturation_threshold) ++clipped;
  }
  r.samples = amax_samples.size();
  r.clip_rate = amax_samples.empty() ? 0 : static_cast<double>(clipped) / amax_samples.size();
  return r;
}

absl::StatusOr<QuantReport> EvaluateQuantLayout(const Deployment& d, const QuantLayout& q) {
  const ModelSpec& m = d.model;
  if (m.mla.has_value()) {
    return absl::InvalidArgumentError(
        "K/V quantization layouts need separate K and V caches; an MLA model caches one latent");
  }
  if (q.bits == 0 || q.bits > 8) return absl::InvalidArgumentError("--bits must be in 1..8");
  if (q.group == 0) return absl::InvalidArgumentError("--group must be >= 1");
  const double channels = static_cast<double>(m.AttentionLayers()) * m.num_kv_heads * m.head_dim;
  const double per_scale = q.scale_bytes * (q.zero_point ? 2 : 1);
  // Per-token: each head's d channels split into ceil(d / G) groups.
  const double per_token_scales = static_cast<double>(m.AttentionLayers()) * m.num_kv_heads *
                                  std::ceil(static_cast<double>(m.head_dim) / q.group) * per_scale;
  // Per-channel: one scale per channel per G tokens.
  const double per_channel_scales = channels * per_scale / q.group;
  QuantReport r;
  r.data_bytes_per_token = 2 * channels * q.bits / 8.0;
  r.scale_bytes_per_token = (q.k_per_channel ? per_channel_scales : per_token_scales) +
                            (q.v_per_channel ? per_channel_scales : per_token_scales);
  r.bytes_per_token = r.data_bytes_per_token + r.scale_bytes_per_token;
  r.bytes_per_token_unquantized = 2 * channels * d.kv_bytes_per_element;
  r.compression = r.bytes_per_token_unquantized / r.bytes_per_token;
  r.residual_tokens = (q.k_per_channel || q.v_per_channel) ? q.group - 1 : 0;
  // Only the per-channel tensors keep a full-precision residual (K and V are
  // half of the unquantized bytes each).
  const int per_channel_tensors = (q.k_per_channel ? 1 : 0) + (q.v_per_channel ? 1 : 0);
  r.residual_bytes = r.residual_tokens * r.bytes_per_token_unquantized * per_channel_tensors / 2;
  return r;
}

}  // namespace kvtier::costmodel
