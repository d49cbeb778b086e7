// KV quantization: FP8 KV (question 3) and grouped K/V quantization layouts
// (question 15).
//
// FP8: a floating-point format keeps the relative rounding error nearly
// independent of the scale; the scale only decides clipping: |x| above
// max_finite * scale saturates (448 for e4m3, 57344 for e5m2).
//
// Layouts: keys have outlier channels, so they are quantized per channel
// (one scale per channel per group of G tokens; the newest tokens stay in
// full precision until a group fills); values per token (one scale per G
// channels of each token).
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_KV_QUANT_H_
#define KVTIER_COSTMODEL_KV_QUANT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "costmodel/deployment.h"

namespace kvtier::costmodel {

struct Fp8Report {
  double bytes_per_token_bf16 = 0;
  double bytes_per_token_fp8 = 0;
  double bytes_saved_per_token = 0;
  double saturation_threshold = 0;  // max_finite * scale
  double clip_rate = 0;             // share of samples with |amax| above it
  uint64_t samples = 0;
};

// format: "e4m3" or "e5m2"; scale > 0. INVALID_ARGUMENT otherwise.
absl::StatusOr<Fp8Report> EvaluateFp8(const Deployment& d, absl::string_view format, double scale,
                                      absl::Span<const double> amax_samples);

struct QuantLayout {
  bool k_per_channel = true;
  bool v_per_channel = false;
  uint32_t group = 128;  // tokens (per-channel) or channels (per-token)
  uint32_t bits = 4;
  double scale_bytes = 2;  // fp16 scale
  bool zero_point = true;  // asymmetric: a zero point per scale
};

struct QuantReport {
  double bytes_per_token = 0;  // data + scales, all ranks
  double data_bytes_per_token = 0;
  double scale_bytes_per_token = 0;
  double bytes_per_token_unquantized = 0;
  double compression = 0;        // unquantized / quantized
  uint32_t residual_tokens = 0;  // newest tokens kept in full precision
  double residual_bytes = 0;     // per request, of the per-channel tensors only
};

// INVALID_ARGUMENT for an MLA model (one latent, no K/V split), bits not in
// 1..8, or group 0.
absl::StatusOr<QuantReport> EvaluateQuantLayout(const Deployment& d, const QuantLayout& layout);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_KV_QUANT_H_
