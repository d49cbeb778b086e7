#include "costmodel/preemption.h"

#include "costmodel/fetch_plan.h"
#include "costmodel/kv_footprint.h"

namespace kvtier::costmodel {

PreemptPlan PlanPreemption(const Deployment& d, const PreemptOptions& o) {
  PreemptPlan p;
  const double n = o.victim_tokens;
  p.recompute_seconds = RecomputeSeconds(d, 0, n);
  p.victim_bytes_per_gpu = KvBytesPerGpuAtContext(d, n);
  const TierLink host{"host", d.gpu.host_link_bytes_per_s, o.host_link_latency_s};
  p.swap_out_seconds = FetchSeconds(host, p.victim_bytes_per_gpu);
  p.swap_in_seconds = p.swap_out_seconds;
  const double weights_per_gpu = d.model.Parameters().total * d.model.weight_bytes_per_param / d.tp;
  p.decode_step_seconds = o.decode_step_seconds.value_or(weights_per_gpu / d.gpu.hbm_bytes_per_s);
  p.wait_seconds = o.victim_remaining_tokens * p.decode_step_seconds;
  p.policies = {
      {"recompute", p.recompute_seconds, 0, p.recompute_seconds,
       "the victim: it waits for its prefill to be redone, and that prefill takes GPU time "
       "from every running request"},
      {"swap", p.swap_in_seconds, 0, p.swap_out_seconds + p.swap_in_seconds,
       "the victim waits for the copy back; the host link is busy for both copies (free "
       "for the GPU when the copies overlap compute)"},
      {"wait", 0, p.wait_seconds, 0,
       "new arrivals: they queue until the victim finishes its remaining decode steps; it "
       "shows in time-to-first-token tail percentiles"},
  };
  return p;
}

}  // namespace kvtier::costmodel
