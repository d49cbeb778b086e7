// libFuzzer target for the planner's input parsers and arithmetic: the bytes
// are read as a Hugging Face config.json; a config that parses is planned on
// a few deployments through every report, and the bytes are also read as a
// prompts JSONL file and run through sharing and stranding. A crash, a
// sanitizer report or a non-finite number where the JSON contract promises a
// number is a bug.
//
// Build and run (clang, Debian's libclang-rt-14-dev): tests/fuzz/run_planner_fuzz.sh
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "client/planner/planner_reports.h"
#include "costmodel/block_sharing.h"
#include "costmodel/catalog.h"
#include "costmodel/hf_config.h"

namespace {

using kvtier::costmodel::Deployment;

// Every number in a report must be finite (unbounded values are null).
void CheckFinite(const nlohmann::json& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) std::abort();
  if (j.is_structured()) {
    for (const auto& v : j) CheckFinite(v);
  }
}

void PlanEverything(const Deployment& d) {
  using namespace kvtier::planner;
  CheckFinite(KvReport(d, 8192).json);
  CheckFinite(BudgetReport(d, {}).json);
  const kvtier::costmodel::TierLink tier{"host", 25e9, 10e-6};
  CheckFinite(FetchReport(d, 4096, tier, {}, 0).json);
  CheckFinite(FetchReport(d, 4096, tier, {}, 64).json);
  CheckFinite(PdReport(d, 4096, kvtier::costmodel::CatalogLinks()).json);
  kvtier::costmodel::PreemptOptions o;
  o.victim_tokens = 4096;
  CheckFinite(PreemptReport(d, o).json);
  CheckFinite(MlaReport(d).json);
  if (auto q = QuantReport(d, {}); q.ok()) CheckFinite(q->json);
  CheckFinite(StateReport(d, 256, 4096).json);
  const kvtier::costmodel::SsdSpec ssd = *kvtier::costmodel::CatalogSsd("samsung-pm9a3-3.84tb");
  auto tiers = DefaultTiers(d, ssd, {});
  if (tiers.ok()) {
    CheckFinite(TiersReport(d, 4096, {tiers->at("host"), tiers->at("nvme")}, ssd, 0).json);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kvtier::costmodel::ModelSpec> m =
      kvtier::costmodel::ModelSpecFromHfConfig(text, "fuzz");
  if (m.ok()) {
    for (uint32_t tp : {1u, 2u, 8u}) {
      Deployment d;
      d.model = *m;
      d.gpu = *kvtier::costmodel::CatalogGpu("h100-sxm");
      d.tp = tp;
      if (d.Validate().ok()) PlanEverything(d);
    }
  }
  absl::StatusOr<kvtier::costmodel::PromptSet> prompts =
      kvtier::costmodel::ParsePrompts(text, 4, 512);
  if (prompts.ok() && prompts->node_count < 100000) {
    kvtier::costmodel::AnalyzeSharing(*prompts, 2);
    for (bool leaf_first : {false, true}) {
      const auto r = kvtier::costmodel::SimulateEviction(*prompts, 3, leaf_first);
      if (leaf_first && r.stranded_blocks_peak != 0) std::abort();  // question 5's guarantee
    }
  }
  return 0;
}
