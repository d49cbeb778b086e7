// bench/lookup_plan: what planning costs a Lookup. For 128-key prefixes it
// times, on one thread and in the same run,
//   baseline: BlockCache::Lookup alone (lock, chained prefix walk, recency);
//   planned:  the same Lookup followed by LookupPlanner::Plan (segments by
//             tier, the cut over every k, NVMe admission re-check),
// and prints both rates and the ratio planned / baseline.
//
//   build/bench/lookup_plan [--chains 2000] [--keys 128] [--seconds 2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "server/lookup_planner.h"
#include "spdlog/spdlog.h"
#include "storage/block_cache.h"

int main(int argc, char** argv) {
  using namespace kvtier;
  using Clock = std::chrono::steady_clock;
  int chains = 2000, keys_per_chain = 128;
  double seconds = 2;
  CLI::App app{"What planning costs a Lookup"};
  app.add_option("--chains", chains, "cached chains")->check(CLI::PositiveNumber);
  app.add_option("--keys", keys_per_chain, "keys per chain")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "seconds per measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  BlockCacheOptions o;
  o.host_bytes = static_cast<uint64_t>(chains) * keys_per_chain * 4096 + (64ull << 20);
  o.slab_bytes = 64ull << 20;
  SystemClock clock;
  auto cache = *BlockCache::Create(o, &clock);
  // Llama-3.1-8B's layout at TP 8 (one KV head per rank), 4 KiB blocks
  // stored as stand-ins: the plan prices the real model.
  NamespaceSpec spec{
      "meta-llama/Llama-3.1-8B", KvLayout{32, 1, 128, DType::kBf16, 16, 0, 8}, "", "", "", {}};
  const NamespaceId ns = cache->OpenNamespace(spec)->id;
  PlannerOptions po;
  po.gpu = "h100-sxm";
  auto planner = *LookupPlanner::Create(po, GpuInventory{}, cache.get());
  planner->Attach(ns, spec, **planner->Prepare(spec, "llama-3.1-8b", ""));
  cache->host_meter().Seed(20e9, 10e-6, "bench");
  std::vector<std::vector<BlockKey>> keys(chains);
  const std::vector<uint8_t> data(4096, 7);
  for (int c = 0; c < chains; ++c) {
    auto batch = *cache->BeginPut(ns);
    BlockKey parent;
    for (int k = 0; k < keys_per_chain; ++k) {
      keys[c].push_back(*BlockKey::Create(absl::StrCat("c", c, "k", k)));
      if (!batch->StartBlock(keys[c].back(), parent, data.size()).ok() ||
          !batch->Append(data).ok()) {
        std::fprintf(stderr, "put failed\n");
        return 1;
      }
      parent = keys[c].back();
    }
    if (!batch->Commit().ok()) return 1;
  }
  auto run = [&](bool plan) {
    uint64_t lookups = 0, cut_sum = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      for (int i = 0; i < 64; ++i, ++lookups) {
        const auto& k = keys[lookups % chains];
        absl::StatusOr<LookupResult> r = cache->Lookup(ns, k, false, absl::ZeroDuration());
        if (!r.ok() || r->blocks.size() != k.size()) std::abort();
        if (plan) cut_sum += planner->Plan(ns, r->blocks, 0)->cut_blocks;
      }
    }
    if (plan && cut_sum == 0) std::fprintf(stderr, "note: every plan recomputed\n");
    return lookups / seconds;
  };
  run(true);  // warm up
  const double base = run(false);
  const double planned = run(true);
  std::printf("lookup_plan: %d-key prefixes, %d chains\n", keys_per_chain, chains);
  std::printf("  baseline Lookup:        %10.0f lookups/s\n", base);
  std::printf("  Lookup + Plan:          %10.0f lookups/s\n", planned);
  std::printf("  ratio planned/baseline: %.3f\n", planned / base);
  return 0;
}
