// Fetch or recompute (question 4): the seconds to recompute a span of prefix
// tokens on the GPU group, the seconds to fetch their KV from a tier, the
// break-even bandwidth, and the cut k (in blocks) that minimises
// fetch(0..k) + recompute(k..n) for a prefix spread over tiers. The daemon
// plans every Lookup with PlanCut.
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_FETCH_PLAN_H_
#define KVTIER_COSTMODEL_FETCH_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "costmodel/deployment.h"

namespace kvtier::costmodel {

// FLOPs to run prefill for tokens [begin, end) given that [0, begin) is
// cached: 2 * N_prefill (active minus LM head) per token plus attention, 2 * H_q * (d_qk + d_v) per
// attention layer per (token, visible context token); sliding layers see at
// most their window. Continuous approximation of the causal sum.
double RecomputeFlops(const ModelSpec& model, double begin, double end);

// RecomputeFlops / (tp * peak FLOP/s * mfu).
double RecomputeSeconds(const Deployment& d, double begin, double end);

// The same arithmetic with the model's coefficients computed once, for
// callers that price many spans of one model (PlanCut walks every cut).
class PrefillCost {
 public:
  explicit PrefillCost(const ModelSpec& model);
  double Flops(double begin, double end) const;

 private:
  double flops_per_token_ = 0;                      // 2 * N_prefill
  double full_pairs_ = 0;                           // per (token, context) pair, all full layers
  std::vector<std::pair<double, double>> sliding_;  // (window, per-pair FLOPs of the group)
};

// Where blocks come from: a tier's bandwidth (bytes/s per GPU) and fixed
// latency per fetch.
struct TierLink {
  std::string name;
  double bytes_per_s = 0;
  double latency_s = 0;
};

// latency + bytes / bandwidth; 0 for 0 bytes.
double FetchSeconds(const TierLink& tier, double bytes);

// Bandwidth at which fetching `tokens` prefix tokens costs exactly as much
// as recomputing them (including latency and attention); +inf when the
// latency alone exceeds the recompute time. Fetch wins strictly above it.
double BreakevenBandwidth(const Deployment& d, const TierLink& tier, double tokens);

// Question 4's per-token break-even with no latency and no attention term:
// bytes_per_token_per_gpu * tp * F * u / (2 * N_prefill).
double AsymptoticBreakevenBandwidth(const Deployment& d);

// A run of consecutive matched blocks held by one tier, in prefix order.
struct Segment {
  TierLink tier;
  uint32_t blocks = 0;
  double bytes = 0;  // per GPU, all of the run's blocks
};

struct CutPlan {
  uint32_t cut_blocks = 0;           // fetch blocks [0, cut), recompute the rest
  double fetch_seconds = 0;          // fetch of [0, cut)
  double recompute_seconds = 0;      // recompute of [cut * B, tokens)
  double total_seconds = 0;          // the two added
  double fetch_all_seconds = 0;      // the largest allowed cut (every matched block
                                     // unless constrained), recompute the rest
  double recompute_all_seconds = 0;  // recompute all `tokens`
  double tokens = 0;                 // the prefix length planned
};

// Where a prefix may be cut. A model with recurrent layers restores only at
// a state checkpoint (question 16): k must be a multiple of step_blocks, and
// fetching adds the checkpoint's state_bytes (per GPU, over the tier of block
// k - 1). step_blocks 0: no checkpoint exists, only k = 0.
struct CutConstraints {
  uint32_t step_blocks = 1;
  double state_bytes = 0;
};

// For a model without recurrent layers: any block. With them: multiples of
// lcm(B, checkpoint_interval) tokens, or nothing when checkpoint_interval is
// 0 (no checkpoints stored).
CutConstraints CutConstraintsFor(const Deployment& d, uint64_t checkpoint_interval);

// `tokens` is the prefix length the plan covers (>= matched blocks * B;
// tokens past the matched blocks are recomputed in every plan). Fetches from
// different tiers are serialised. Ties go to the smaller cut. fetch_all is
// the largest cut the constraints allow.
CutPlan PlanCut(const Deployment& d, absl::Span<const Segment> segments, double tokens,
                const CutConstraints& constraints = {});

// A cut a prefix can be restored at, when the cuts are not the prefixes of
// one chain (a hybrid model: each cut fetches its own sliding-window blocks
// and state snapshot besides the shared full-attention prefix). bytes[i] is
// what restoring at the cut fetches from tiers[i] (per GPU).
struct CutOption {
  uint32_t cut_blocks = 0;
  std::vector<double> bytes;
};

// The option minimising fetch + recompute of [cut * B, tokens); cut 0
// (recompute everything) is always an option. Fetches from different tiers
// are serialised, one latency per tier fetched from. Ties go to the smaller
// cut; fetch_all is the largest option. Options past tokens / B or with a
// bytes size other than tiers' are ignored.
CutPlan PlanAmongCuts(const Deployment& d, absl::Span<const TierLink> tiers,
                      absl::Span<const CutOption> options, double tokens);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_FETCH_PLAN_H_
