// Tier value and SSD endurance (question 9). A tier is worth, per token, the
// recompute time it avoids minus its fetch time; a tier with non-positive
// value should not hold the model's blocks (the daemon's NVMe admission
// follows it). An SSD lasts TBW = capacity * DWPD * 365 * warranty years.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_TIER_VALUE_H_
#define KVTIER_COSTMODEL_TIER_VALUE_H_

#include "costmodel/deployment.h"
#include "costmodel/fetch_plan.h"

namespace kvtier::costmodel {

struct TierValue {
  TierLink tier;
  double recompute_seconds_per_token = 0;  // averaged over the prefix
  double fetch_seconds_per_token = 0;      // bytes / bandwidth + latency / tokens
  double value_seconds_per_token = 0;      // the first minus the second
  bool worthwhile = false;                 // value > 0
};

// Averaged over a prefix of `tokens` tokens (> 0).
TierValue EvaluateTier(const Deployment& d, const TierLink& tier, double tokens);

struct SsdWear {
  double tbw_bytes = 0;
  double sustainable_write_bytes_per_s = 0;  // capacity * DWPD / 86,400
  double write_bytes_per_s = 0;              // the rate evaluated
  double days_to_wear_out = 0;               // TBW / (rate * 86,400)
};

// write_bytes_per_s <= 0 evaluates the sustainable rate.
SsdWear EvaluateSsdWear(const SsdSpec& ssd, double write_bytes_per_s);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_TIER_VALUE_H_
