// LookupPlanner: prices each Lookup with the cost model. It knows the GPU
// (detected, or costmodel.gpu) and each namespace's model (given at
// OpenNamespace), reads the tiers' measured bandwidth and latency from the
// BlockCache's TransferMeters, and
//  - plans every Lookup: the cut k that minimises fetch(0..k) +
//    recompute(k..n) over the matched blocks as they lie across tiers;
//  - decides NVMe admission per namespace: a namespace whose NVMe tier
//    value (recompute time avoided minus fetch time, per token, at
//    costmodel.admission_tokens) is not positive has its blocks kept off
//    NVMe (BlockCache::SetNvmeAdmission). Re-evaluated on every plan, so it
//    follows the measured NVMe bandwidth, with hysteresis (back on only
//    when the value exceeds 5% of the recompute time per token). With NVMe
//    unmeasured (probe off or failed) admission stays on while plans price
//    NVMe as unusable.
//  - A hybrid namespace (layer groups) is planned among its restorable
//    cuts (PlanHybrid, server/hybrid_cut_planner.h). A model with recurrent
//    layers opened without groups has no state checkpoints stored: its plans
//    recompute from block 0.
//
// Thread-safety: thread-safe. Lock order: LookupPlanner::mu_ before the
// BlockCache's lock. The cache calls back only into a HybridCutPlanner's
// Choose, under its lock, which takes no lock and calls nothing.
#ifndef KVTIER_SERVER_LOOKUP_PLANNER_H_
#define KVTIER_SERVER_LOOKUP_PLANNER_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"
#include "costmodel/deployment.h"
#include "costmodel/fetch_plan.h"
#include "gpu/gpu_probe.h"
#include "server/hybrid_cut_planner.h"
#include "storage/block_cache.h"

namespace kvtier {

struct PlannerOptions {
  std::string gpu = "auto";  // catalog name, or auto = the detected device
  double mfu = 0.5;
  bool fp8_compute = false;
  double admission_tokens = 4096;
};

// What a namespace's model and the planner make of it.
struct NamespacePlanning {
  std::string cost_model;  // "" when none was given
  bool plans_enabled = false;
  std::string note;
  bool nvme_admitted = true;
  double nvme_value_seconds_per_token = 0;  // 0 when not evaluated
  // What a hit saves per byte of this rank's blocks (recompute seconds over
  // costmodel.admission_tokens, per KV byte), given to the cache's eviction
  // policy (BlockCache::SetRetentionValue); 0 when not priced.
  double retention_seconds_per_byte = 0;
};

struct TierReading {
  std::string tier;  // host | nvme
  TransferEstimate estimate;
};

// The fetch-or-recompute decisions of the Lookups planned since start.
struct PlanDecisions {
  uint64_t fetch = 0;      // fetch every matched block
  uint64_t partial = 0;    // fetch a prefix of them, recompute the rest
  uint64_t recompute = 0;  // blocks matched, but recomputing all is faster
  uint64_t fetch_tokens = 0;
  uint64_t recompute_tokens = 0;
  double seconds_saved = 0;  // estimated: recompute-all time minus the plan's
};

struct PlannerSnapshot {
  bool enabled = false;
  std::string gpu;
  double mfu = 0;
  std::string note;
  std::vector<TierReading> tiers;
  PlanDecisions decisions;
};

// The model a client named, resolved but not yet attached to a namespace.
struct PreparedModel {
  std::string name;
  costmodel::ModelSpec spec;
};

class LookupPlanner {
 public:
  // INVALID_ARGUMENT for an unknown costmodel.gpu name. Without a known GPU
  // the planner is created disabled (no plans, admission ignores value).
  static absl::StatusOr<std::unique_ptr<LookupPlanner>> Create(const PlannerOptions& options,
                                                               const GpuInventory& gpus,
                                                               BlockCache* cache);

  // Resolves the model fields of an OpenNamespace request (a catalog name or
  // config.json text) and checks it fits the layout; changes nothing.
  // nullopt when neither is given. INVALID_ARGUMENT for an invalid layout, an
  // unknown name, a malformed config, both given, a TP the model's KV heads
  // cannot be split over, or a layout that is not one rank of the model (KV
  // heads per rank, head dim or the latent's dim for MLA, layers).
  absl::StatusOr<std::optional<PreparedModel>> Prepare(const NamespaceSpec& spec,
                                                       absl::string_view cost_model,
                                                       absl::string_view config_json) const;

  // Records the model of an open namespace (nullopt keeps any earlier one)
  // and applies its NVMe admission.
  NamespacePlanning Attach(const NamespaceId& ns, const NamespaceSpec& spec,
                           std::optional<PreparedModel> model) ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets a closed namespace's model (a re-open names it again), so
  // namespaces opened and closed over time do not accumulate here.
  void Detach(const NamespaceId& ns) ABSL_LOCKS_EXCLUDED(mu_);

  // The plan for a Lookup's match, or nullopt when the namespace has no
  // model or the planner is disabled. prompt_tokens 0 = matched tokens.
  // Plan and PlanHybrid re-judge NVMe admission first when the measured
  // NVMe link changed, which may wait for the cache's lock; with
  // `may_wait` false they do not (AdmissionCurrent says when that skips
  // nothing) and wait only for short locks that are never held across one.
  std::optional<costmodel::CutPlan> Plan(const NamespaceId& ns,
                                         absl::Span<const MatchedBlock> matched,
                                         uint32_t prompt_tokens, bool may_wait = true)
      ABSL_LOCKS_EXCLUDED(mu_);
  // False when a plan for `ns` would re-judge NVMe admission now.
  bool AdmissionCurrent(const NamespaceId& ns) ABSL_LOCKS_EXCLUDED(mu_);

  // The cluster tier's question: does fetching `blocks` blocks (`bytes`)
  // that follow the first `first_block` over a peer link of
  // `link_bytes_per_s` beat recomputing their tokens? True without a model
  // for the namespace (nothing to weigh) or with the link not measured yet
  // (the first pull measures it).
  bool PeerFetchBeatsRecompute(const NamespaceId& ns, uint32_t first_block, uint32_t blocks,
                               uint64_t bytes, double link_bytes_per_s) ABSL_LOCKS_EXCLUDED(mu_);

  // For a hybrid namespace with a model: the chooser to pass to its Lookup,
  // priced with the tiers as measured now; else null. Once the Lookup ran,
  // Record counts its plan among the decisions (if Choose made one).
  std::unique_ptr<HybridCutPlanner> PlanHybrid(const NamespaceId& ns, uint32_t prompt_tokens,
                                               bool may_wait = true) ABSL_LOCKS_EXCLUDED(mu_);
  void Record(const HybridCutPlanner& planned, size_t matched) ABSL_LOCKS_EXCLUDED(mu_);

  std::optional<NamespacePlanning> Namespace(const NamespaceId& ns) const ABSL_LOCKS_EXCLUDED(mu_);
  PlannerSnapshot Snapshot() const;

 private:
  struct Entry {
    NamespacePlanning planning;
    // Immutable once made; shared so plans run outside the lock.
    std::shared_ptr<const costmodel::Deployment> deployment;
    // The NVMe estimate admission was last judged on: plans re-judge only
    // when it changed, not on every Lookup.
    double judged_nvme_bytes_per_s = -1;
    double judged_nvme_latency_s = -1;
    bool hybrid = false;  // layer groups: planned with PlanHybrid
  };

  // The namespace's deployment (null without an entry or a model, and with
  // `hybrid_only` for a namespace without groups), and whether the measured
  // NVMe link changed since admission was last judged (never without one).
  struct Judged {
    std::shared_ptr<const costmodel::Deployment> deployment;
    bool stale = false;
  };
  Judged JudgedOf(const NamespaceId& ns, bool hybrid_only) const ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a plan of `matched` blocks among the decisions.
  void Count(const costmodel::CutPlan& plan, size_t matched, uint32_t block_tokens)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The namespace's deployment (null without one), NVMe admission re-judged
  // first (if `rejudge`) when the measured NVMe link changed. With
  // `hybrid_only`, null for a namespace without groups.
  std::shared_ptr<const costmodel::Deployment> DeploymentOf(const NamespaceId& ns, bool hybrid_only,
                                                            bool rejudge = true)
      ABSL_LOCKS_EXCLUDED(mu_);

  LookupPlanner(const PlannerOptions& options, std::optional<costmodel::GpuSpec> gpu,
                std::string note, BlockCache* cache);
  // Tier links from the meters (the host link caps the host tier).
  costmodel::TierLink HostLink() const;
  costmodel::TierLink NvmeLink() const;
  // Re-evaluates NVMe admission (d null: no model); tells the cache when it
  // changes, outside mu_ (which is never held across a cache call).
  // Prices a hit on the namespace's blocks for the eviction policy.
  void UpdateRetentionValue(const NamespaceId& ns, const NamespaceSpec& spec,
                            const costmodel::Deployment* d) ABSL_LOCKS_EXCLUDED(mu_);
  void UpdateAdmission(const NamespaceId& ns, const costmodel::Deployment* d)
      ABSL_LOCKS_EXCLUDED(mu_);
  // INVALID_ARGUMENT unless the layout is what one rank of the model holds.
  static absl::Status CheckLayout(const NamespaceSpec& spec, const costmodel::Deployment& d);

  const PlannerOptions options_;
  const std::optional<costmodel::GpuSpec> gpu_;
  const std::string note_;
  BlockCache* const cache_;
  mutable Mutex mu_;
  PlanDecisions decisions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<NamespaceId, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_LOOKUP_PLANNER_H_
