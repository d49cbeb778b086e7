// The NVMe write policy and the demotion rules the mover applies, as pure
// functions of their inputs: which host blocks a mover pass writes to NVMe,
// and how much it moves. The policy is parsed once (at BlockCache::Create);
// the mover's hot filter compares enums, never strings.
//
// Thread-safety: pure functions and plain values; safe from any thread.
#ifndef KVTIER_STORAGE_NVME_WRITE_POLICY_H_
#define KVTIER_STORAGE_NVME_WRITE_POLICY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvtier {

// When blocks are written to NVMe.
enum class WritePolicy : uint8_t {
  kWriteBack,              // "write_back": on demotion, under host pressure
  kWriteThrough,           // "write_through": soon after every Put
  kWriteThroughAfterHits,  // "write_through_after_hits": once a block has enough uses
};

// INVALID_ARGUMENT for a name that is not one of the three above.
absl::StatusOr<WritePolicy> ParseWritePolicy(absl::string_view name);
// The option's spelling ("write_back", ...), as ParseWritePolicy reads it.
absl::string_view WritePolicyName(WritePolicy policy);

// What the mover's demotion rules depend on, fixed at Create.
struct DemotionRule {
  WritePolicy policy = WritePolicy::kWriteBack;
  uint32_t write_through_hits = 2;  // kWriteThroughAfterHits: uses needed
  uint32_t admit_min_uses = 2;      // kWriteBack: uses needed under pressure
  double host_high_watermark = 0.90;
  double host_low_watermark = 0.80;
};

// One host-only leaf the mover considers writing.
struct DemotionCandidate {
  uint32_t uses = 0;             // Put + Lookup hits + Gets
  bool namespace_admits = true;  // BlockCache::SetNvmeAdmission
  bool retained = true;          // retention priority above 0 (PutBatch::set_retention)
};

enum class DemotionVerdict : uint8_t {
  kWrite,          // write it (and its ancestors not yet on NVMe)
  kRefusedValue,   // its namespace does not admit NVMe writes (counted)
  kRefusedFilter,  // too few uses, or retention priority 0, under host pressure (counted)
  kSkip,           // not wanted now (no pressure), not counted
};

// Whether the policy wants `candidate` written, and why not.
DemotionVerdict DecideDemotion(const DemotionRule& rule, const DemotionCandidate& candidate,
                               bool host_pressure);

// One mover pass's demotion plan for the host tier's occupancy.
struct DemotionPass {
  bool host_pressure = false;  // occupancy above the high watermark
  bool run = false;            // look for candidates at all
  // Host bytes to write before occupancy is back under the low watermark
  // (unbounded, 1e300, when the policy writes without pressure).
  double bytes_needed = 0;
};
DemotionPass PlanDemotionPass(const DemotionRule& rule, uint64_t host_used_bytes,
                              uint64_t host_capacity_bytes);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_WRITE_POLICY_H_
