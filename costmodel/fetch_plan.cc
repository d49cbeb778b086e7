#include "costmodel/fetch_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "costmodel/kv_footprint.h"
#include "costmodel/model_spec.h"

namespace kvtier::costmodel {
namespace {

// Integral of min(window, c) dc over [b, e).
double VisibleContextIntegral(double b, double e, double window) {
  if (e <= window) return (e * e - b * b) / 2;
  if (b >= window) return window * (e - b);
  return (window * window - b * b) / 2 + window * (e - window);
}

}  // namespace

PrefillCost::PrefillCost(const ModelSpec& model)
    : flops_per_token_(2 * model.Parameters().prefill) {
  double qk = model.head_dim, v = model.head_dim;
  if (model.mla.has_value()) {
    qk = model.mla->qk_nope_head_dim + model.mla->qk_rope_head_dim;
    v = model.mla->v_head_dim;
  }
  const double per_pair = 2.0 * model.num_attention_heads * (qk + v);
  for (const LayerGroup& g : model.EffectiveGroups()) {
    if (g.kind == LayerKind::kFullAttention) {
      full_pairs_ += per_pair * g.layers;
    } else if (g.kind == LayerKind::kSlidingWindow) {
      sliding_.emplace_back(g.window, per_pair * g.layers);
    }
  }
}

double PrefillCost::Flops(double begin, double end) const {
  if (end <= begin) return 0;
  double flops = flops_per_token_ * (end - begin) + full_pairs_ * (end * end - begin * begin) / 2;
  for (const auto& [window, pairs] : sliding_) {
    flops += pairs * VisibleContextIntegral(begin, end, window);
  }
  return flops;
}

double RecomputeFlops(const ModelSpec& model, double begin, double end) {
  return PrefillCost(model).Flops(begin, end);
}

double RecomputeSeconds(const Deployment& d, double begin, double end) {
  return RecomputeFlops(d.model, begin, end) / d.GroupFlops();
}

double FetchSeconds(const TierLink& tier, double bytes) {
  if (bytes <= 0) return 0;
  return tier.latency_s + bytes / tier.bytes_per_s;
}

double BreakevenBandwidth(const Deployment& d, const TierLink& tier, double tokens) {
  const double bytes = tokens * ComputeKvFootprint(d).bytes_per_token_per_gpu;
  const double spare = RecomputeSeconds(d, 0, tokens) - tier.latency_s;
  if (spare <= 0) return std::numeric_limits<double>::infinity();
  return bytes / spare;
}

double AsymptoticBreakevenBandwidth(const Deployment& d) {
  return ComputeKvFootprint(d).bytes_per_token_per_gpu * d.GroupFlops() /
         (2 * d.model.Parameters().prefill);
}

CutConstraints CutConstraintsFor(const Deployment& d, uint64_t checkpoint_interval) {
  if (d.model.LayersOf(LayerKind::kRecurrent) == 0) return {};
  if (checkpoint_interval == 0) return CutConstraints{0, 0};
  const StatePlan s = PlanState(d, checkpoint_interval, 0);
  return CutConstraints{static_cast<uint32_t>(s.restart_boundary_tokens / d.block_tokens),
                        s.state_bytes_per_checkpoint / d.tp};
}

CutPlan PlanCut(const Deployment& d, absl::Span<const Segment> segments, double tokens,
                const CutConstraints& constraints) {
  uint32_t matched = 0;
  for (const Segment& s : segments) matched += s.blocks;
  const double b = d.block_tokens;
  matched = static_cast<uint32_t>(std::min<double>(matched, std::floor(tokens / b)));
  CutPlan best;
  const PrefillCost cost(d.model);
  const double group_flops = d.GroupFlops();
  best.recompute_all_seconds = cost.Flops(0, tokens) / group_flops;
  best.tokens = tokens;
  best.total_seconds = std::numeric_limits<double>::infinity();
  // Walk k = 0..matched; fetch cost grows segment by segment.
  double fetched_before = 0;  // seconds of the segments wholly before k
  uint32_t seg_start = 0;
  size_t seg = 0;
  for (uint32_t k = 0; k <= matched; ++k) {
    while (seg < segments.size() && k > seg_start + segments[seg].blocks) {
      fetched_before += FetchSeconds(segments[seg].tier, segments[seg].bytes);
      seg_start += segments[seg].blocks;
      ++seg;
    }
    double fetch = fetched_before;
    if (seg < segments.size() && k > seg_start) {
      const Segment& s = segments[seg];
      fetch += FetchSeconds(s.tier, s.bytes * (k - seg_start) / s.blocks);
    }
    const bool allowed =
        k == 0 || (constraints.step_blocks > 0 && k % constraints.step_blocks == 0);
    if (!allowed) continue;
    if (k > 0 && constraints.state_bytes > 0) {
      // The checkpoint at the cut comes from the tier holding block k - 1.
      const Segment& s = segments[std::min(seg, segments.size() - 1)];
      fetch += constraints.state_bytes / s.tier.bytes_per_s;
    }
    const double recompute = cost.Flops(k * b, tokens) / group_flops;
    best.fetch_all_seconds = fetch + recompute;  // the last allowed k wins
    if (fetch + recompute < best.total_seconds) {
      best.cut_blocks = k;
      best.fetch_seconds = fetch;
      best.recompute_seconds = recompute;
      best.total_seconds = fetch + recompute;
    }
  }
  return best;
}

CutPlan PlanAmongCuts(const Deployment& d, absl::Span<const TierLink> tiers,
                      absl::Span<const CutOption> options, double tokens) {
  const PrefillCost cost(d.model);
  const double group_flops = d.GroupFlops();
  CutPlan best;
  best.tokens = tokens;
  best.recompute_all_seconds = cost.Flops(0, tokens) / group_flops;
  best.total_seconds = best.recompute_all_seconds;
  best.recompute_seconds = best.recompute_all_seconds;
  best.fetch_all_seconds = best.recompute_all_seconds;
  const double b = d.block_tokens;
  uint32_t largest = 0;
  for (const CutOption& o : options) {
    if (o.cut_blocks == 0 || o.bytes.size() != tiers.size() || o.cut_blocks * b > tokens) continue;
    double fetch = 0;
    for (size_t t = 0; t < tiers.size(); ++t) fetch += FetchSeconds(tiers[t], o.bytes[t]);
    const double recompute = cost.Flops(o.cut_blocks * b, tokens) / group_flops;
    const double total = fetch + recompute;
    if (o.cut_blocks > largest) {
      largest = o.cut_blocks;
      best.fetch_all_seconds = total;
    }
    if (total < best.total_seconds ||
        (total == best.total_seconds && o.cut_blocks < best.cut_blocks)) {
      best.cut_blocks = o.cut_blocks;
      best.fetch_seconds = fetch;
      best.recompute_seconds = recompute;
      best.total_seconds = total;
    }
  }
  return best;
}

}  // namespace kvtier::costmodel
