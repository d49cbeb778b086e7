#include "costmodel/attention_roofline.h"

namespace kvtier::costmodel {

AttentionRoofline ComputeAttentionRoofline(const Deployment& d) {
  const ModelSpec& m = d.model;
  const double b = d.kv_bytes_per_element;
  const double hq = m.num_attention_heads;
  AttentionRoofline r;
  if (m.mla.has_value()) {
    const double latent = m.mla->kv_lora_rank + m.mla->qk_rope_head_dim;
    r.attention = "mla-absorbed";
    r.flops_per_cached_token = hq * (2 * latent + 2.0 * m.mla->kv_lora_rank);
    r.bytes_per_cached_token = latent * b;
    // Without absorption every head has its own K (nope + rope) and V.
    const double k = m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim;
    const double v = m.mla->v_head_dim;
    r.gqa_arithmetic_intensity = hq * 2 * (k + v) / (hq * (k + v) * b);
  } else {
    r.attention = "gqa";
    r.flops_per_cached_token = 4 * hq * m.head_dim;  // q.k and p.v
    r.bytes_per_cached_token = 2.0 * m.num_kv_heads * m.head_dim * b;
    r.gqa_arithmetic_intensity = r.flops_per_cached_token / r.bytes_per_cached_token;
  }
  r.arithmetic_intensity = r.flops_per_cached_token / r.bytes_per_cached_token;
  // Decode attention kernels (FlashMLA, FlashAttention) compute in bf16
  // whatever the prefill matmul dtype.
  r.ridge_point = d.gpu.bf16_flops / d.gpu.hbm_bytes_per_s;
  r.regime = r.arithmetic_intensity >= r.ridge_point ? "compute-bound" : "memory-bound";
  return r;
}

}  // namespace kvtier::costmodel
