// Decode attention on the roofline (question 13). Absorbed MLA reads one
// latent per cached token for all query heads, so each byte feeds about
// 2 * H_q FLOPs (bf16), near or past the ridge point; GQA decode does
// 2 * g / b FLOPs per byte (g query heads per KV head) and is memory-bound.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_ATTENTION_ROOFLINE_H_
#define KVTIER_COSTMODEL_ATTENTION_ROOFLINE_H_

#include <string>

#include "costmodel/deployment.h"

namespace kvtier::costmodel {

struct AttentionRoofline {
  std::string attention;  // "mla-absorbed" or "gqa"
  // Per cached token, per attention layer, per decode query.
  double flops_per_cached_token = 0;
  double bytes_per_cached_token = 0;
  double arithmetic_intensity = 0;  // FLOP / byte
  double ridge_point = 0;           // bf16 peak FLOP/s / HBM bytes/s
  std::string regime;               // memory-bound | compute-bound
  // The same for a GQA layout of the same query heads with one KV head per
  // group of g = H_q / H_kv (for MLA: what the uncompressed cache would do).
  double gqa_arithmetic_intensity = 0;
};

AttentionRoofline ComputeAttentionRoofline(const Deployment& d);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_ATTENTION_ROOFLINE_H_
