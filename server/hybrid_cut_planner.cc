#include "server/hybrid_cut_planner.h"

#include <algorithm>
#include <vector>

namespace kvtier {

size_t HybridCutPlanner::Choose(absl::Span<const CutFetch> cuts) {
  const costmodel::Deployment& d = *deployment_;
  size_t longest = 0;
  std::vector<costmodel::CutOption> options;
  options.reserve(cuts.size());
  for (const CutFetch& c : cuts) {
    longest = std::max(longest, c.cut);
    if (c.cut == 0) continue;
    // A namespace's blocks are one rank's: bytes per GPU, as the model prices.
    options.push_back({static_cast<uint32_t>(c.cut),
                       {static_cast<double>(c.host_bytes), static_cast<double>(c.nvme_bytes)}});
  }
  const double tokens =
      std::max<double>(static_cast<double>(longest) * d.block_tokens, prompt_tokens_);
  const costmodel::TierLink tiers[] = {host_, nvme_};
  plan_ = costmodel::PlanAmongCuts(d, tiers, options, tokens);
  return plan_->cut_blocks;
}

}  // namespace kvtier
