// Planner reports: the answers `kvtier plan SUBCOMMAND` prints. Each report
// holds the JSON object (a stable contract, docs/planner.md) and the text
// that shows the arithmetic behind it. Inputs are resolved from flags by
// plan_command.cc; these functions only compute and format.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_CLIENT_PLANNER_PLANNER_REPORTS_H_
#define KVTIER_CLIENT_PLANNER_PLANNER_REPORTS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "costmodel/block_sharing.h"
#include "costmodel/deployment.h"
#include "costmodel/fetch_plan.h"
#include "costmodel/kv_quant.h"
#include "costmodel/memory_budget.h"
#include "costmodel/preemption.h"
#include "nlohmann/json.hpp"

namespace kvtier::planner {

struct Report {
  nlohmann::json json;
  std::string text;
};

// The tiers the planner knows by name, with default bandwidth and latency
// for a deployment: host = the GPU's host link, nvme = the SSD's sequential
// read, peer = a 200 Gb/s NIC. `overrides` replaces bandwidths by name.
absl::StatusOr<std::map<std::string, costmodel::TierLink>> DefaultTiers(
    const costmodel::Deployment& d, const costmodel::SsdSpec& ssd,
    const std::map<std::string, double>& bandwidth_overrides);

// "host=25e9,nvme=3e9" -> {host: 25e9, nvme: 3e9}.
absl::StatusOr<std::map<std::string, double>> ParseTierBandwidths(const std::string& text);
// "host:10,nvme:20" -> [(host, 10), (nvme, 20)].
absl::StatusOr<std::vector<std::pair<std::string, uint32_t>>> ParseTierBlocks(
    const std::string& text);

Report KvReport(const costmodel::Deployment& d, double context_tokens);
Report BudgetReport(const costmodel::Deployment& d, const costmodel::BudgetOptions& options);
// `layout` empty: the whole prefix from `tier`.
// checkpoint_interval: recurrent state checkpoints available every so many
// tokens (0: none; a model with recurrent layers then cannot fetch).
Report FetchReport(const costmodel::Deployment& d, double tokens, const costmodel::TierLink& tier,
                   const std::vector<costmodel::Segment>& layout, uint64_t checkpoint_interval = 0);
Report TiersReport(const costmodel::Deployment& d, double tokens,
                   const std::vector<costmodel::TierLink>& tiers, const costmodel::SsdSpec& ssd,
                   double write_bytes_per_s);
Report PdReport(const costmodel::Deployment& d, double prompt_tokens,
                const std::vector<costmodel::LinkSpec>& links);
Report PreemptReport(const costmodel::Deployment& d, const costmodel::PreemptOptions& options);
Report MlaReport(const costmodel::Deployment& d);
absl::StatusOr<Report> QuantReport(const costmodel::Deployment& d,
                                   const costmodel::QuantLayout& layout);
absl::StatusOr<Report> Fp8Report(const costmodel::Deployment& d, const std::string& format,
                                 double scale, const std::vector<double>& amax_samples);
Report SharingReport(const costmodel::Deployment& d, const costmodel::PromptSet& prompts,
                     uint32_t samples);
Report StrandReport(const costmodel::Deployment& d, const costmodel::PromptSet& prompts,
                    uint64_t capacity_blocks);
Report StateReport(const costmodel::Deployment& d, uint64_t checkpoint_interval,
                   double context_tokens);

// The "inputs" object every report carries: model, GPU and parallelism.
nlohmann::json DeploymentJson(const costmodel::Deployment& d);

}  // namespace kvtier::planner

#endif  // KVTIER_CLIENT_PLANNER_PLANNER_REPORTS_H_
