#include "server/lookup_planner.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "costmodel/catalog.h"
#include "costmodel/fetch_plan.h"
#include "costmodel/hf_config.h"
#include "costmodel/tier_value.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr double kDefaultHostLatency = 10e-6;
// Admission turns back on only when NVMe beats recompute by this fraction of
// the recompute time per token.
constexpr double kAdmitMargin = 0.05;

// The deployment of one rank's namespace; the GPU may be a placeholder when
// the planner only validates.
costmodel::Deployment DeploymentFor(const NamespaceSpec& spec, const costmodel::ModelSpec& model,
                                    const costmodel::GpuSpec& gpu, const PlannerOptions& o) {
  costmodel::Deployment d;
  d.model = model;
  d.gpu = gpu;
  d.tp = std::max<uint32_t>(1, spec.layout.tp_size);
  d.kv_bytes_per_element = DTypeBytes(spec.layout.dtype);
  d.block_tokens = spec.layout.tokens_per_block;
  d.mfu = o.mfu;
  d.fp8_compute = o.fp8_compute;
  return d;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LookupPlanner>> LookupPlanner::Create(const PlannerOptions& options,
                                                                     const GpuInventory& gpus,
                                                                     BlockCache* cache) {
  std::optional<costmodel::GpuSpec> gpu;
  std::string note;
  if (options.gpu != "auto") {
    absl::StatusOr<costmodel::GpuSpec> g = costmodel::CatalogGpu(options.gpu);
    if (!g.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("costmodel.gpu: ", g.status().message()));
    }
    gpu = *g;
    note = absl::StrCat("GPU ", g->name, " from costmodel.gpu");
  } else if (gpus.devices.empty()) {
    note = absl::StrCat("planner off: no GPU detected (", gpus.detail,
                        "); set costmodel.gpu to price recompute for the engines' GPU");
  } else {
    absl::StatusOr<costmodel::GpuSpec> g = costmodel::CatalogGpuForDevice(gpus.devices[0].name);
    if (g.ok()) {
      gpu = *g;
      note = absl::StrCat("GPU ", g->name, " detected (", gpus.devices[0].name, ")");
    } else {
      note = absl::StrCat("planner off: ", g.status().message());
    }
  }
  if (options.mfu <= 0 || options.mfu > 1) {
    return absl::InvalidArgumentError("costmodel.mfu must be in (0, 1]");
  }
  return std::unique_ptr<LookupPlanner>(new LookupPlanner(options, gpu, note, cache));
}

LookupPlanner::LookupPlanner(const PlannerOptions& options, std::optional<costmodel::GpuSpec> gpu,
                             std::string note, BlockCache* cache)
    : options_(options), gpu_(std::move(gpu)), note_(std::move(note)), cache_(cache) {}

absl::Status LookupPlanner::CheckLayout(const NamespaceSpec& spec, const costmodel::Deployment& d) {
  const KvLayout& layout = spec.layout;
  const costmodel::ModelSpec& m = d.model;
  // With layer groups, num_layers counts every layer; the attention layers
  // are those of the attention groups (none: nothing to compare).
  uint32_t attention_layers = layout.num_layers;
  if (spec.hybrid()) {
    attention_layers = 0;
    for (const LayerGroup& g : spec.groups) {
      if (g.kind != GroupKind::kRecurrent)
        attention_layers += static_cast<uint32_t>(g.layers.size());
    }
    if (attention_layers == 0) return absl::OkStatus();
  }
  if (layout.latent && !m.mla.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the layout is latent (MLA) but model ", m.name, " has no MLA attention"));
  }
  uint32_t heads = 0, dim = 0;
  if (m.mla.has_value()) {
    heads = 1;  // one latent per token and layer, on every rank
    dim = m.mla->kv_lora_rank + m.mla->qk_rope_head_dim;
  } else {
    heads = m.num_kv_heads >= d.tp ? m.num_kv_heads / d.tp : 1;
    dim = m.head_dim;
  }
  const uint32_t layers = m.AttentionLayers();
  if (layout.num_kv_heads != heads || layout.head_dim != dim || attention_layers > layers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model %s does not match the layout: at TP %d a rank holds %d KV head(s) of dim %d in "
        "up to %d attention layers; the layout says %d head(s) of dim %d in %d layers",
        m.name, d.tp, heads, dim, layers, layout.num_kv_heads, layout.head_dim, attention_layers));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<PreparedModel>> LookupPlanner::Prepare(
    const NamespaceSpec& spec, absl::string_view cost_model, absl::string_view config_json) const {
  if (cost_model.empty() && config_json.empty()) return std::optional<PreparedModel>();
  // The layout's own errors first, worded as OpenNamespace words them.
  if (absl::Status s = ValidateNamespaceSpec(spec, cache_->options().max_block_bytes); !s.ok()) {
    return s;
  }
  if (!cost_model.empty() && !config_json.empty()) {
    return absl::InvalidArgumentError("give cost_model or model_config_json, not both");
  }
  if (config_json.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError("model_config_json is larger than 1 MiB");
  }
  absl::StatusOr<costmodel::ModelSpec> model =
      cost_model.empty() ? costmodel::ModelSpecFromHfConfig(config_json, spec.model_id)
                         : costmodel::CatalogModel(cost_model);
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", model.status().message()));
  }
  // Validate against the layout with the real GPU or, when none is known, a
  // catalog one: the model must be usable once a GPU is configured.
  const costmodel::GpuSpec gpu = gpu_.has_value() ? *gpu_ : *costmodel::CatalogGpu("h100-sxm");
  const costmodel::Deployment d = DeploymentFor(spec, *model, gpu, options_);
  if (absl::Status s = d.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model: ", s.message()));
  }
  RETURN_IF_ERROR(CheckLayout(spec, d));
  PreparedModel p{
      cost_model.empty() ? absl::StrCat("config:", spec.model_id) : std::string(cost_model),
      *std::move(model)};
  return std::optional<PreparedModel>(std::move(p));
}

void LookupPlanner::Detach(const NamespaceId& ns) {
  MutexLock lock(&mu_);
  entries_.erase(ns);
}

NamespacePlanning LookupPlanner::Attach(const NamespaceId& ns, const NamespaceSpec& spec,
                                        std::optional<PreparedModel> model) {
  std::shared_ptr<const costmodel::Deployment> deployment;
  {
    MutexLock lock(&mu_);
    Entry& e = entries_[ns];
    e.hybrid = spec.hybrid();
    if (model.has_value()) {
      e.planning.cost_model = model->name;
      if (gpu_.has_value()) {
        e.deployment = std::make_shared<const costmodel::Deployment>(
            DeploymentFor(spec, model->spec, *gpu_, options_));
        e.planning.plans_enabled = true;
        e.planning.note = absl::StrFormat("plans priced for %s on %s, TP %d, MFU %.2f", model->name,
                                          gpu_->name, e.deployment->tp, options_.mfu);
        if (model->spec.LayersOf(costmodel::LayerKind::kRecurrent) > 0 && !spec.hybrid()) {
          absl::StrAppend(&e.planning.note,
                          "; the model has recurrent layers and kvtier stores no state "
                          "checkpoints yet, so plans recompute from the first block");
        }
      } else {
        e.deployment.reset();
        e.planning.plans_enabled = false;
        e.planning.note = note_;
      }
    } else if (e.planning.cost_model.empty()) {
      e.planning.plans_enabled = false;
      e.planning.note =
          "no model given (OpenNamespace cost_model or model_config_json): Lookups carry no plan";
    }
    deployment = e.deployment;
  }
  UpdateAdmission(ns, deployment.get());
  UpdateRetentionValue(ns, spec, deployment.get());
  MutexLock lock(&mu_);
  return entries_[ns].planning;
}

costmodel::TierLink LookupPlanner::HostLink() const {
  const TransferEstimate e = cache_->host_meter().Estimate();
  double bw = gpu_.has_value() ? gpu_->host_link_bytes_per_s : std::numeric_limits<double>::max();
  if (e.bytes_per_s > 0) bw = std::min(bw, e.bytes_per_s);
  return {"host", bw, e.bytes_per_s > 0 ? e.latency_s : kDefaultHostLatency};
}

costmodel::TierLink LookupPlanner::NvmeLink() const {
  const TransferEstimate e = cache_->nvme_meter().Estimate();
  // Unmeasured: price NVMe as unusable rather than guess a speed.
  return {"nvme", e.bytes_per_s > 0 ? e.bytes_per_s : 1.0, e.latency_s};
}

void LookupPlanner::UpdateRetentionValue(const NamespaceId& ns, const NamespaceSpec& spec,
                                         const costmodel::Deployment* d) {
  if (d == nullptr || spec.layout.tokens_per_block == 0) return;
  absl::StatusOr<uint64_t> block_bytes = BlockBytes(spec.layout);
  if (!block_bytes.ok() || *block_bytes == 0) return;
  const double tokens = options_.admission_tokens;
  const double bytes_per_token =
      static_cast<double>(*block_bytes) / static_cast<double>(spec.layout.tokens_per_block);
  const double value = costmodel::RecomputeSeconds(*d, 0, tokens) / tokens / bytes_per_token;
  if (!cache_->SetRetentionValue(ns, value).ok()) return;  // not finite, or closed meanwhile
  MutexLock lock(&mu_);
  auto it = entries_.find(ns);
  if (it != entries_.end()) it->second.planning.retention_seconds_per_byte = value;
}

void LookupPlanner::UpdateAdmission(const NamespaceId& ns, const costmodel::Deployment* d) {
  // Evaluate outside the lock; decide under it; tell the cache outside it
  // (mu_ is never held across a cache call, so a thread that may not wait,
  // an inline Lookup, only ever waits for mu_ while short work holds it).
  const TransferEstimate nvme = cache_->nvme_meter().Estimate();
  std::optional<costmodel::TierValue> value;
  if (d != nullptr && cache_->nvme_enabled() && nvme.bytes_per_s > 0) {
    value = costmodel::EvaluateTier(*d, NvmeLink(), options_.admission_tokens);
  }
  bool admit = false;
  double value_now = 0;
  std::string model;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(ns);
    if (it == entries_.end()) return;
    it->second.judged_nvme_bytes_per_s = nvme.bytes_per_s;
    it->second.judged_nvme_latency_s = nvme.latency_s;
    NamespacePlanning& p = it->second.planning;
    admit = p.nvme_admitted;
    if (!value.has_value()) {
      admit = true;  // nothing to judge by: the mover's other filters decide
    } else {
      p.nvme_value_seconds_per_token = value->value_seconds_per_token;
      // Hysteresis: off at a non-positive value, on again only with a margin,
      // so a bandwidth hovering at break-even does not flap.
      if (p.nvme_admitted && value->value_seconds_per_token <= 0) admit = false;
      if (!p.nvme_admitted &&
          value->value_seconds_per_token > kAdmitMargin * value->recompute_seconds_per_token) {
        admit = true;
      }
    }
    if (admit == p.nvme_admitted) return;
    p.nvme_admitted = admit;
    value_now = p.nvme_value_seconds_per_token;
    model = p.cost_model;
  }
  if (!cache_->SetNvmeAdmission(ns, admit).ok()) {
    // Closed meanwhile: undo, unless re-judged since.
    MutexLock lock(&mu_);
    auto it = entries_.find(ns);
    if (it != entries_.end() && it->second.planning.nvme_admitted == admit) {
      it->second.planning.nvme_admitted = !admit;
    }
    return;
  }
  spdlog::info("namespace {}: NVMe admission {} (tier value {:.3g} s/token for {})", ns.ToHex(),
               admit ? "on" : "off", value_now, model);
}

LookupPlanner::Judged LookupPlanner::JudgedOf(const NamespaceId& ns, bool hybrid_only) const {
  Judged j;
  double judged_bytes_per_s = 0, judged_latency_s = 0;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(ns);
    if (it == entries_.end() || (hybrid_only && !it->second.hybrid)) return j;
    j.deployment = it->second.deployment;
    judged_bytes_per_s = it->second.judged_nvme_bytes_per_s;
    judged_latency_s = it->second.judged_nvme_latency_s;
  }
  if (j.deployment == nullptr) return j;  // no model: no meter read either
  const TransferEstimate nvme_now = cache_->nvme_meter().Estimate();
  j.stale = judged_bytes_per_s != nvme_now.bytes_per_s || judged_latency_s != nvme_now.latency_s;
  return j;
}

std::shared_ptr<const costmodel::Deployment> LookupPlanner::DeploymentOf(const NamespaceId& ns,
                                                                         bool hybrid_only,
                                                                         bool rejudge) {
  const Judged j = JudgedOf(ns, hybrid_only);
  if (rejudge && j.stale) UpdateAdmission(ns, j.deployment.get());
  return j.deployment;
}

bool LookupPlanner::AdmissionCurrent(const NamespaceId& ns) {
  return !JudgedOf(ns, /*hybrid_only=*/false).stale;
}

std::unique_ptr<HybridCutPlanner> LookupPlanner::PlanHybrid(const NamespaceId& ns,
                                                            uint32_t prompt_tokens, bool may_wait) {
  std::shared_ptr<const costmodel::Deployment> d =
      DeploymentOf(ns, /*hybrid_only=*/true, /*rejudge=*/may_wait);
  if (d == nullptr) return nullptr;
  return std::make_unique<HybridCutPlanner>(std::move(d), HostLink(), NvmeLink(), prompt_tokens);
}

std::optional<costmodel::CutPlan> LookupPlanner::Plan(const NamespaceId& ns,
                                                      absl::Span<const MatchedBlock> matched,
                                                      uint32_t prompt_tokens, bool may_wait) {
  std::shared_ptr<const costmodel::Deployment> deployment =
      DeploymentOf(ns, /*hybrid_only=*/false, /*rejudge=*/may_wait);
  if (deployment == nullptr) return std::nullopt;
  const costmodel::Deployment& d = *deployment;
  const costmodel::TierLink host = HostLink(), nvme = NvmeLink();
  std::vector<costmodel::Segment> segments;
  for (const MatchedBlock& b : matched) {
    const costmodel::TierLink& link = b.on_host ? host : nvme;
    if (segments.empty() || segments.back().tier.name != link.name) {
      segments.push_back({link, 0, 0});
    }
    ++segments.back().blocks;
    segments.back().bytes += static_cast<double>(b.size);
  }
  const double matched_tokens = static_cast<double>(matched.size()) * d.block_tokens;
  const double tokens = std::max<double>(matched_tokens, prompt_tokens);
  // Without layer groups no state checkpoints are stored: a recurrent model
  // can only restart at 0 (hybrids are planned by PlanHybrid).
  costmodel::CutPlan plan =
      costmodel::PlanCut(d, segments, tokens, costmodel::CutConstraintsFor(d, 0));
  if (!matched.empty()) Count(plan, matched.size(), d.block_tokens);
  return plan;
}

bool LookupPlanner::PeerFetchBeatsRecompute(const NamespaceId& ns, uint32_t first_block,
                                            uint32_t blocks, uint64_t bytes,
                                            double link_bytes_per_s) {
  const std::shared_ptr<const costmodel::Deployment> d = DeploymentOf(ns, /*hybrid_only=*/false);
  if (d == nullptr || link_bytes_per_s <= 0) return true;
  const double begin = static_cast<double>(first_block) * d->block_tokens;
  const double end = begin + static_cast<double>(blocks) * d->block_tokens;
  const costmodel::TierLink link{"peer", link_bytes_per_s, 0};
  return costmodel::FetchSeconds(link, static_cast<double>(bytes)) <
         costmodel::RecomputeSeconds(*d, begin, end);
}

void LookupPlanner::Record(const HybridCutPlanner& planned, size_t matched) {
  if (planned.plan().has_value()) Count(*planned.plan(), matched, planned.block_tokens());
}

void LookupPlanner::Count(const costmodel::CutPlan& plan, size_t matched, uint32_t block_tokens) {
  const double fetch_tokens = static_cast<double>(plan.cut_blocks) * block_tokens;
  MutexLock lock(&mu_);
  if (plan.cut_blocks == 0) {
    ++decisions_.recompute;
  } else if (plan.cut_blocks == matched) {
    ++decisions_.fetch;
  } else {
    ++decisions_.partial;
  }
  decisions_.fetch_tokens += static_cast<uint64_t>(fetch_tokens);
  decisions_.recompute_tokens += static_cast<uint64_t>(std::max(0.0, plan.tokens - fetch_tokens));
  decisions_.seconds_saved += std::max(0.0, plan.recompute_all_seconds - plan.total_seconds);
}

std::optional<NamespacePlanning> LookupPlanner::Namespace(const NamespaceId& ns) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(ns);
  if (it == entries_.end()) return std::nullopt;
  return it->second.planning;
}

PlannerSnapshot LookupPlanner::Snapshot() const {
  PlannerSnapshot s;
  s.enabled = gpu_.has_value();
  s.gpu = gpu_.has_value() ? gpu_->name : "";
  s.mfu = options_.mfu;
  s.note = note_;
  s.tiers.push_back({"host", cache_->host_meter().Estimate()});
  if (cache_->nvme_enabled()) s.tiers.push_back({"nvme", cache_->nvme_meter().Estimate()});
  MutexLock lock(&mu_);
  s.decisions = decisions_;
  return s;
}

}  // namespace kvtier
