#include "client/planner/planner_reports.h"

#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/planner/report_format.h"
#include "costmodel/attention_roofline.h"
#include "costmodel/catalog.h"
#include "costmodel/kv_footprint.h"
#include "costmodel/pd_link.h"
#include "costmodel/tier_value.h"

namespace kvtier::planner {

using costmodel::Deployment;
using nlohmann::json;

json DeploymentJson(const Deployment& d) {
  const costmodel::ParameterCounts p = d.model.Parameters();
  return {{"model", d.model.name},
          {"gpu", d.gpu.name},
          {"tp", d.tp},
          {"kv_dtype", KvElement(d)},
          {"block_tokens", d.block_tokens},
          {"mfu", d.mfu},
          {"compute_dtype", d.fp8_compute ? "fp8" : "bf16"},
          {"gpu_flops", costmodel::PeakFlops(d.gpu, d.fp8_compute)},
          {"params_total", p.total},
          {"params_active", p.active},
          {"params_prefill", p.prefill}};
}

absl::StatusOr<std::map<std::string, costmodel::TierLink>> DefaultTiers(
    const Deployment& d, const costmodel::SsdSpec& ssd,
    const std::map<std::string, double>& overrides) {
  std::map<std::string, costmodel::TierLink> tiers;
  tiers["host"] = {"host", d.gpu.host_link_bytes_per_s, 10e-6};
  tiers["nvme"] = {"nvme", ssd.read_bytes_per_s, ssd.read_latency_s};
  const costmodel::LinkSpec nic = *costmodel::CatalogLink("nic-200g");
  tiers["peer"] = {"peer", nic.bytes_per_s, nic.latency_s};
  for (const auto& [name, bw] : overrides) {
    auto it = tiers.find(name);
    if (it == tiers.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown tier '", name, "'; tiers are host, nvme, peer"));
    }
    it->second.bytes_per_s = bw;
  }
  return tiers;
}

absl::StatusOr<std::map<std::string, double>> ParseTierBandwidths(const std::string& text) {
  std::map<std::string, double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, '=');
    double v = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &v) || !(v > 0) ||
        !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tier-bandwidth: '", part, "' is not TIER=BYTES_PER_SECOND with a positive number"));
    }
    out[std::string(absl::StripAsciiWhitespace(kv.first))] = v;
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, uint32_t>>> ParseTierBlocks(
    const std::string& text) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, ':');
    uint32_t n = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tiers: '", part, "' is not TIER:BLOCKS (e.g. host:10)"));
    }
    out.emplace_back(std::string(absl::StripAsciiWhitespace(kv.first)), n);
  }
  if (out.empty()) return absl::InvalidArgumentError("--tiers: no TIER:BLOCKS given");
  return out;
}

}  // namespace kvtier::planner
