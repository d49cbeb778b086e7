#include "costmodel/tier_value.h"

#include "costmodel/kv_footprint.h"

namespace kvtier::costmodel {

TierValue EvaluateTier(const Deployment& d, const TierLink& tier, double tokens) {
  TierValue v;
  v.tier = tier;
  v.recompute_seconds_per_token = RecomputeSeconds(d, 0, tokens) / tokens;
  v.fetch_seconds_per_token =
      ComputeKvFootprint(d).bytes_per_token_per_gpu / tier.bytes_per_s + tier.latency_s / tokens;
  v.value_seconds_per_token = v.recompute_seconds_per_token - v.fetch_seconds_per_token;
  v.worthwhile = v.value_seconds_per_token > 0;
  return v;
}

SsdWear EvaluateSsdWear(const SsdSpec& ssd, double write_bytes_per_s) {
  SsdWear w;
  w.tbw_bytes = ssd.capacity_bytes * ssd.dwpd * 365 * ssd.warranty_years;
  w.sustainable_write_bytes_per_s = ssd.capacity_bytes * ssd.dwpd / 86400;
  w.write_bytes_per_s = write_bytes_per_s > 0 ? write_bytes_per_s : w.sustainable_write_bytes_per_s;
  w.days_to_wear_out = w.tbw_bytes / (w.write_bytes_per_s * 86400);
  return w;
}

}  // namespace kvtier::costmodel
