// Preemption (question 7): when KV memory runs out, the engine can recompute
// a victim later, swap its KV to host memory and back, or make new arrivals
// wait. This prices each choice for a victim of n tokens and says who pays.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_PREEMPTION_H_
#define KVTIER_COSTMODEL_PREEMPTION_H_

#include <optional>
#include <string>
#include <vector>

#include "costmodel/deployment.h"

namespace kvtier::costmodel {

struct PreemptOptions {
  double victim_tokens = 0;
  double victim_remaining_tokens = 256;  // decode steps the victim still needs
  // Seconds per decode step; default: weights per GPU / HBM bandwidth (a
  // memory-bound step).
  std::optional<double> decode_step_seconds;
  double host_link_latency_s = 5e-6;
};

struct PolicyCost {
  std::string policy;  // recompute | swap | wait
  double victim_delay_seconds = 0;
  double arrivals_delay_seconds = 0;
  double gpu_busy_seconds = 0;  // GPU or link time spent on the policy itself
  std::string who_pays;
};

struct PreemptPlan {
  double recompute_seconds = 0;
  double swap_out_seconds = 0;
  double swap_in_seconds = 0;
  double wait_seconds = 0;
  double decode_step_seconds = 0;
  double victim_bytes_per_gpu = 0;
  std::vector<PolicyCost> policies;
};

PreemptPlan PlanPreemption(const Deployment& d, const PreemptOptions& options);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_PREEMPTION_H_
