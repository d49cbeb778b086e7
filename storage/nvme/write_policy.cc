#include "storage/nvme/write_policy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvtier {

absl::StatusOr<WritePolicy> ParseWritePolicy(absl::string_view name) {
  if (name == "write_back") return WritePolicy::kWriteBack;
  if (name == "write_through") return WritePolicy::kWriteThrough;
  if (name == "write_through_after_hits") return WritePolicy::kWriteThroughAfterHits;
  return absl::InvalidArgumentError(
      absl::StrCat("nvme write policy '", name,
                   "' is not one of write_back, write_through, write_through_after_hits"));
}

absl::string_view WritePolicyName(WritePolicy policy) {
  switch (policy) {
    case WritePolicy::kWriteBack:
      return "write_back";
    case WritePolicy::kWriteThrough:
      return "write_through";
    case WritePolicy::kWriteThroughAfterHits:
      return "write_through_after_hits";
  }
  return "unknown";
}

DemotionVerdict DecideDemotion(const DemotionRule& rule, const DemotionCandidate& candidate,
                               bool host_pressure) {
  if (!candidate.namespace_admits) return DemotionVerdict::kRefusedValue;
  bool wanted = false;
  if (!candidate.retained)
    return host_pressure ? DemotionVerdict::kRefusedFilter : DemotionVerdict::kSkip;
  switch (rule.policy) {
    case WritePolicy::kWriteThrough:
      wanted = true;
      break;
    case WritePolicy::kWriteThroughAfterHits:
      wanted = candidate.uses >= rule.write_through_hits;
      break;
    case WritePolicy::kWriteBack:
      wanted = host_pressure && candidate.uses >= rule.admit_min_uses;
      break;
  }
  if (wanted) return DemotionVerdict::kWrite;
  return host_pressure ? DemotionVerdict::kRefusedFilter : DemotionVerdict::kSkip;
}

DemotionPass PlanDemotionPass(const DemotionRule& rule, uint64_t host_used_bytes,
                              uint64_t host_capacity_bytes) {
  const double capacity = static_cast<double>(host_capacity_bytes);
  const double used = static_cast<double>(host_used_bytes);
  DemotionPass pass;
  pass.host_pressure = used > rule.host_high_watermark * capacity;
  pass.run = rule.policy != WritePolicy::kWriteBack || pass.host_pressure;
  pass.bytes_needed = pass.host_pressure ? used - rule.host_low_watermark * capacity : 1e300;
  return pass;
}

}  // namespace kvtier
