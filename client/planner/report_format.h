// Number formatting the planner reports share: byte sizes, durations and
// rates in text, and JSON numbers (null for unbounded values).
//
// Thread-safety: pure functions.
#ifndef KVTIER_CLIENT_PLANNER_REPORT_FORMAT_H_
#define KVTIER_CLIENT_PLANNER_REPORT_FORMAT_H_

#include <string>

#include "costmodel/deployment.h"
#include "costmodel/fetch_plan.h"
#include "nlohmann/json.hpp"

namespace kvtier::planner {

// "123 B", or "N B (x.xx KiB)" from a KiB up.
std::string Bytes(double b);
// "never" for infinity, else s, ms, us or ns with three decimals.
std::string Secs(double s);
// GB/s with three decimals; infinity reads as unreachable.
std::string Rate(double bps);
// JSON has no infinity: unbounded values are null.
nlohmann::json Num(double v);
// "fp8" or "bf16": how the deployment stores KV elements.
std::string KvElement(const costmodel::Deployment& d);
// {"name", "bytes_per_s", "latency_s"} of a tier.
nlohmann::json TierJson(const costmodel::TierLink& t);

}  // namespace kvtier::planner

#endif  // KVTIER_CLIENT_PLANNER_REPORT_FORMAT_H_
