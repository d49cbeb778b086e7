// GPU memory budget for the KV cache (questions 1 and 10): what one GPU has
// left for KV after weights, activations, CUDA graphs and the "other
// gigabytes", each reservation listed with whether an engine like vLLM
// measures it (profile run) or it must be estimated.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_MEMORY_BUDGET_H_
#define KVTIER_COSTMODEL_MEMORY_BUDGET_H_

#include <optional>
#include <string>
#include <vector>

#include "costmodel/deployment.h"

namespace kvtier::costmodel {

struct BudgetOptions {
  double util = 0.9;  // the engine's gpu_memory_utilization
  std::optional<double> weights_bytes_per_gpu;
  std::optional<double> activation_bytes;
  std::optional<double> cudagraph_bytes;
  double other_bytes = 0;            // anything else the operator knows of
  double max_batched_tokens = 8192;  // tokens of the profile run
  double max_sequences = 256;        // sampler batch
};

struct BudgetItem {
  std::string name;
  double bytes = 0;
  bool measured_by_engine = false;
  std::string note;  // how it was estimated, and its source
};

struct MemoryBudget {
  double usable_bytes = 0;  // util * memory
  std::vector<BudgetItem> items;
  double kv_budget_bytes_per_gpu = 0;  // usable - items (>= 0)
  double shortfall_bytes = 0;          // > 0 when the items alone exceed usable
  double max_blocks_per_gpu = 0;
  double max_tokens_per_gpu = 0;
  double longest_request_tokens = 0;  // +inf when KV stops growing (all sliding)
  std::vector<std::string> oom_risks;
};

MemoryBudget PlanMemoryBudget(const Deployment& d, const BudgetOptions& options);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_MEMORY_BUDGET_H_
