#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/planner/planner_reports.h"
#include "client/planner/report_format.h"
#include "costmodel/attention_roofline.h"
#include "costmodel/catalog.h"
#include "costmodel/kv_footprint.h"
#include "costmodel/pd_link.h"
#include "costmodel/tier_value.h"

namespace kvtier::planner {

using costmodel::Deployment;
using nlohmann::json;

Report SharingReport(const Deployment& d, const costmodel::PromptSet& prompts, uint32_t samples) {
  const costmodel::SharingReport s = costmodel::AnalyzeSharing(prompts, samples);
  const double block_bytes =
      costmodel::ComputeKvFootprint(d).bytes_per_token_per_gpu * prompts.block_tokens;
  Report r;
  r.json = {
      {"inputs", DeploymentJson(d)},
      {"prompts", s.prompts},
      {"samples", samples},
      {"block_tokens", prompts.block_tokens},
      {"blocks_without_sharing", s.blocks_without_sharing},
      {"blocks_with_sharing", s.blocks_with_sharing},
      {"saving_fraction", s.saving_fraction},
      {"cow_copies", s.cow_copies},
      {"partial_blocks", s.partial_blocks},
      {"bytes_saved_per_gpu",
       (static_cast<double>(s.blocks_without_sharing) - s.blocks_with_sharing) * block_bytes}};
  absl::StrAppendFormat(&r.text, "prompts           = %d x %d samples, blocks of %d tokens%s\n",
                        s.prompts, samples, prompts.block_tokens,
                        prompts.from_trace_hash_ids ? " (the trace's hash_ids blocks)" : "");
  absl::StrAppendFormat(&r.text, "without sharing   = %d blocks\n", s.blocks_without_sharing);
  absl::StrAppendFormat(&r.text,
                        "with sharing      = %d distinct prefixes + %d partial blocks + %d "
                        "copy-on-write copies = %d blocks\n",
                        prompts.node_count, s.partial_blocks, s.cow_copies, s.blocks_with_sharing);
  absl::StrAppendFormat(&r.text, "saving            = %.4f\n", s.saving_fraction);
  return r;
}

Report StrandReport(const Deployment& d, const costmodel::PromptSet& prompts,
                    uint64_t capacity_blocks) {
  const double block_bytes =
      costmodel::ComputeKvFootprint(d).bytes_per_token_per_gpu * prompts.block_tokens;
  Report r;
  json pj = json::array();
  for (bool leaf_first : {false, true}) {
    const costmodel::EvictionReport e =
        costmodel::SimulateEviction(prompts, capacity_blocks, leaf_first);
    const double hit_rate = e.lookups ? static_cast<double>(e.hits) / e.lookups : 0;
    const char* name = leaf_first ? "leaf_first" : "lru";
    pj.push_back({{"eviction", name},
                  {"hit_rate", hit_rate},
                  {"evictions", e.evictions},
                  {"stranded_blocks_final", e.stranded_blocks_final},
                  {"stranded_bytes_final", e.stranded_blocks_final * block_bytes},
                  {"stranded_blocks_peak", e.stranded_blocks_peak}});
    absl::StrAppendFormat(&r.text,
                          "%-10s hit rate %.4f, %d evictions, stranded %d blocks (%s) at the "
                          "end, %d at the peak\n",
                          name, hit_rate, e.evictions, e.stranded_blocks_final,
                          Bytes(e.stranded_blocks_final * block_bytes), e.stranded_blocks_peak);
  }
  r.json = {{"inputs", DeploymentJson(d)},
            {"prompts", prompts.prompts.size()},
            {"capacity_blocks", capacity_blocks},
            {"block_tokens", prompts.block_tokens},
            {"policies", pj}};
  return r;
}

}  // namespace kvtier::planner
