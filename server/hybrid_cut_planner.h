// HybridCutPlanner: the fetch-or-recompute plan of one hybrid Lookup, taken
// among the namespace's restorable cuts (question 4 with layer groups): each
// cut is priced with the bytes restoring it fetches from each tier (its
// full-attention prefix, its window, its snapshots) against recomputing the
// rest. LookupPlanner::PlanHybrid makes one per Lookup with the model and
// tier links read beforehand; BlockCache::Lookup calls Choose under its lock
// (pure arithmetic: no lock, no call back).
//
// Thread-safety: one Lookup's; not shared.
#ifndef KVTIER_SERVER_HYBRID_CUT_PLANNER_H_
#define KVTIER_SERVER_HYBRID_CUT_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/types/span.h"
#include "costmodel/deployment.h"
#include "costmodel/fetch_plan.h"
#include "storage/groups/cut_chooser.h"

namespace kvtier {

class HybridCutPlanner final : public CutChooser {
 public:
  // `prompt_tokens` 0: the longest cut's tokens.
  HybridCutPlanner(std::shared_ptr<const costmodel::Deployment> deployment,
                   costmodel::TierLink host, costmodel::TierLink nvme, uint32_t prompt_tokens)
      : deployment_(std::move(deployment)),
        host_(std::move(host)),
        nvme_(std::move(nvme)),
        prompt_tokens_(prompt_tokens) {}

  size_t Choose(absl::Span<const CutFetch> cuts) override;

  // The plan Choose made; nullopt when it was not called (nothing matched).
  const std::optional<costmodel::CutPlan>& plan() const { return plan_; }
  uint32_t block_tokens() const { return deployment_->block_tokens; }

 private:
  const std::shared_ptr<const costmodel::Deployment> deployment_;
  const costmodel::TierLink host_, nvme_;
  const uint32_t prompt_tokens_;
  std::optional<costmodel::CutPlan> plan_;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_HYBRID_CUT_PLANNER_H_
