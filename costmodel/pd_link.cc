#include "costmodel/pd_link.h"

#include "costmodel/fetch_plan.h"
#include "costmodel/kv_footprint.h"

namespace kvtier::costmodel {

PdPlan PlanPd(const Deployment& d, double prompt_tokens, const std::vector<LinkSpec>& links) {
  PdPlan p;
  p.prompt_tokens = prompt_tokens;
  p.prefill_seconds_per_token = RecomputeSeconds(d, 0, prompt_tokens) / prompt_tokens;
  p.bytes_per_token_per_gpu = ComputeKvFootprint(d).bytes_per_token_per_gpu;
  p.required_link_bytes_per_s_per_gpu = p.bytes_per_token_per_gpu / p.prefill_seconds_per_token;
  p.transfer_bytes_per_gpu = p.bytes_per_token_per_gpu * prompt_tokens;
  for (const LinkSpec& l : links) {
    p.links.push_back({l, l.bytes_per_s >= p.required_link_bytes_per_s_per_gpu,
                       p.required_link_bytes_per_s_per_gpu / l.bytes_per_s});
  }
  return p;
}

}  // namespace kvtier::costmodel
