// bench/hybrid_groups: what layer groups cost and save (issue 18), each
// against its baseline in the same run.
//  1. Bytes held for one long chain of a gpt-oss-120b-shaped namespace (one
//     rank at TP 8), saved as an engine holds it after prefill (every
//     full-attention block, the sliding window's last blocks), against the
//     same chain stored as all full attention; the measured saving is set
//     beside the planner's (`kvtier plan kv`, question 12) at that context.
//  2. Lookup of 128 keys on a three-group namespace (full attention,
//     sliding window, recurrent) against the same Lookup on a one-group
//     namespace of as many chains; rounds interleave the two.
//  3. Save and Load through a host region (the path behind the Save and
//     Load RPCs) of a hybrid block set (attention blocks, window blocks and
//     state snapshots) against the same blocks, same sizes, in one group.
//
//   build/bench/hybrid_groups [--context 131072] [--chains 500] [--seconds 1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "costmodel/catalog.h"
#include "costmodel/kv_footprint.h"
#include "datapath/region_copy.h"
#include "spdlog/spdlog.h"
#include "storage/block_cache.h"
#include "testing/vector_region.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

BlockKey KeyOf(const std::string& tag, size_t i) {
  return *BlockKey::Create(absl::StrCat(tag, "-", i, "-padding-bytes").substr(0, 16));
}

std::unique_ptr<BlockCache> MakeCache(uint64_t host_bytes) {
  BlockCacheOptions o;
  o.host_bytes = host_bytes;
  o.slab_bytes = 64ull << 20;
  o.max_block_bytes = 16ull << 20;
  static SystemClock clock;
  absl::StatusOr<std::unique_ptr<BlockCache>> c = BlockCache::Create(o, &clock);
  if (!c.ok()) {
    std::fprintf(stderr, "BlockCache: %s\n", c.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(c);
}

// Stores `n` blocks of each group listed in `blocks` (group, key index,
// size) in batches, judged whole at the end as a Save is.
void Store(BlockCache& cache, const NamespaceId& ns, const std::string& tag,
           const std::vector<std::tuple<uint32_t, size_t, uint64_t>>& blocks) {
  std::vector<uint8_t> bytes;
  const auto whole = cache.DeferSweeps(ns);
  for (size_t at = 0; at < blocks.size();) {
    auto batch = *cache.BeginPut(ns, whole.get());
    for (size_t end = std::min(blocks.size(), at + 256); at < end; ++at) {
      const auto& [group, i, size] = blocks[at];
      bytes.assign(size, static_cast<uint8_t>(i));
      const BlockKey parent = i == 0 ? BlockKey() : KeyOf(tag, i - 1);
      if (absl::Status s = batch->StartBlock(KeyOf(tag, i), parent, size, group); !s.ok()) {
        std::fprintf(stderr, "store: %s\n", s.ToString().c_str());
        std::exit(1);
      }
      batch->Append(bytes).IgnoreError();
    }
    if (absl::StatusOr<PutResult> r = batch->Commit(); !r.ok()) {
      std::fprintf(stderr, "commit: %s\n", r.status().ToString().c_str());
      std::exit(1);
    }
  }
}

uint64_t BytesHeld(BlockCache& cache, const NamespaceId& ns) {
  for (const NamespaceSnapshot& s : cache.Namespaces()) {
    if (s.id == ns) return s.bytes;
  }
  return 0;
}

// 1. Bytes held against the planner's sliding-window saving.
void BytesHeldAgainstPlan(uint32_t context) {
  const costmodel::ModelSpec model = *costmodel::CatalogModel("gpt-oss-120b");
  costmodel::Deployment d{model, *costmodel::CatalogGpu("h100-sxm"), 8};
  const uint32_t block_tokens = d.block_tokens;
  const uint32_t heads = model.num_kv_heads / d.tp;
  // The model's layers in order, grouped by kind as an engine groups them.
  std::vector<uint32_t> full, sliding;
  uint32_t window = 0, layer = 0;
  for (const costmodel::LayerGroup& g : model.groups) {
    for (uint32_t i = 0; i < g.layers; ++i, ++layer) {
      (g.kind == costmodel::LayerKind::kSlidingWindow ? sliding : full).push_back(layer);
    }
    if (g.kind == costmodel::LayerKind::kSlidingWindow) window = g.window;
  }
  const size_t blocks = context / block_tokens;
  const size_t window_blocks = (window + block_tokens - 1) / block_tokens;
  NamespaceSpec hybrid;
  hybrid.model_id = "gpt-oss-120b";
  hybrid.layout =
      KvLayout{model.num_layers, heads, model.head_dim, DType::kBf16, block_tokens, 0, d.tp};
  hybrid.groups = {{GroupKind::kSlidingWindow, sliding, window, 0, 0},
                   {GroupKind::kFullAttention, full, 0, 0, 0}};
  NamespaceSpec plain = hybrid;
  plain.groups.clear();
  const uint64_t sw_bytes = *GroupBlockBytes(GeometryOf(hybrid.layout), hybrid.groups[0]);
  const uint64_t fa_bytes = *GroupBlockBytes(GeometryOf(hybrid.layout), hybrid.groups[1]);
  const uint64_t plain_bytes = *BlockBytes(plain.layout);
  auto cache = MakeCache(blocks * plain_bytes + (256ull << 20));
  // The hybrid chain: every full-attention block, the window's last blocks.
  const NamespaceId h = cache->OpenNamespace(hybrid)->id;
  std::vector<std::tuple<uint32_t, size_t, uint64_t>> list;
  for (size_t i = 0; i < blocks; ++i) list.emplace_back(1, i, fa_bytes);
  for (size_t i = blocks - std::min(blocks, window_blocks); i < blocks; ++i) {
    list.emplace_back(0, i, sw_bytes);
  }
  Store(*cache, h, "chain", list);
  std::vector<BlockKey> keys;
  for (size_t i = 0; i < blocks; ++i) keys.push_back(KeyOf("chain", i));
  const uint32_t cut = cache->Lookup(h, keys, false, absl::ZeroDuration())->matched;
  const uint64_t hybrid_held = BytesHeld(*cache, h);
  cache->CloseNamespace(h, /*drop_blocks=*/true).IgnoreError();
  // The same chain as all full attention.
  const NamespaceId p = cache->OpenNamespace(plain)->id;
  list.clear();
  for (size_t i = 0; i < blocks; ++i) list.emplace_back(0, i, plain_bytes);
  Store(*cache, p, "chain", list);
  const uint64_t plain_held = BytesHeld(*cache, p);
  const double measured = 1.0 - static_cast<double>(hybrid_held) / plain_held;
  const double planned = costmodel::SlidingWindowSaving(d, context);
  std::printf(
      "1. bytes held, gpt-oss-120b at TP 8, one %u-token chain (%zu blocks; cut %u restorable)\n"
      "   hybrid (full + window of %u tokens): %.1f MiB; all full attention: %.1f MiB\n"
      "   saving measured %.5f, planned (plan kv --context %u) %.5f: differ by %.3f%% of the "
      "plan (target <= 1%%)\n\n",
      context, blocks, cut, window, hybrid_held / 1048576.0, plain_held / 1048576.0, measured,
      context, planned, 100.0 * std::fabs(measured - planned) / planned);
}

// 2. Lookup of 128 keys: three groups against one.
void LookupThreeGroupsAgainstOne(int chains, double seconds) {
  constexpr int kKeys = 128;
  constexpr uint32_t kTokens = 16, kDim = 64;
  const uint64_t attention = 2 * 2 * kDim * kTokens * 2;  // 2 layers, 1 head: 8 KiB
  NamespaceSpec hybrid;
  hybrid.model_id = "lookup-hybrid";
  hybrid.layout = KvLayout{6, 1, kDim, DType::kBf16, kTokens, 0, 1};
  hybrid.groups = {{GroupKind::kFullAttention, {0, 1}, 0, 0, 0},
                   {GroupKind::kSlidingWindow, {2, 3}, 128, 0, 0},
                   {GroupKind::kRecurrent, {4, 5}, 0, 4096, 64}};
  NamespaceSpec plain;
  plain.model_id = "lookup-plain";
  plain.layout = KvLayout{2, 1, kDim, DType::kBf16, kTokens, 0, 1};
  auto cache =
      MakeCache(static_cast<uint64_t>(chains) * kKeys * (attention + 4096) * 2 + (256ull << 20));
  const NamespaceId h = cache->OpenNamespace(hybrid)->id;
  const NamespaceId p = cache->OpenNamespace(plain)->id;
  std::vector<std::vector<BlockKey>> hkeys(chains), pkeys(chains);
  for (int c = 0; c < chains; ++c) {
    const std::string ht = absl::StrCat("h", c), pt = absl::StrCat("p", c);
    std::vector<std::tuple<uint32_t, size_t, uint64_t>> hl, pl;
    for (int i = 0; i < kKeys; ++i) {
      hl.emplace_back(0, i, attention);
      if (i >= kKeys - 8) hl.emplace_back(1, i, attention);         // the window
      if ((i + 1) % 4 == 0) hl.emplace_back(2, i, uint64_t{4096});  // checkpoints
      pl.emplace_back(0, i, attention);
      hkeys[c].push_back(KeyOf(ht, i));
      pkeys[c].push_back(KeyOf(pt, i));
    }
    Store(*cache, h, ht, hl);
    Store(*cache, p, pt, pl);
  }
  // What a daemon with the model's cost model adds: every restorable cut
  // listed with its bytes per tier (the planner's arithmetic on them is not
  // in this figure).
  class Longest final : public CutChooser {
    size_t Choose(absl::Span<const CutFetch> cuts) override { return cuts.front().cut; }
  } longest;
  auto run = [&](const NamespaceId& ns, const std::vector<std::vector<BlockKey>>& keys,
                 double budget, uint64_t* calls, CutChooser* chooser = nullptr) {
    const auto start = Clock::now();
    uint64_t n = 0;
    while (Since(start) < budget) {
      for (int i = 0; i < 64; ++i, ++n) {
        auto r = cache->Lookup(ns, keys[n % keys.size()], false, absl::ZeroDuration(), chooser);
        if (!r.ok() || r->matched != kKeys) {
          std::fprintf(stderr, "lookup missed\n");
          std::exit(1);
        }
      }
    }
    *calls += n;
    return Since(start);
  };
  double th = 0, tp = 0, tc = 0;
  uint64_t nh = 0, np = 0, nc = 0;
  for (int round = 0; round < 10; ++round) {
    tp += run(p, pkeys, seconds / 10, &np);
    th += run(h, hkeys, seconds / 10, &nh);
    tc += run(h, hkeys, seconds / 10, &nc, &longest);
  }
  const double us_h = 1e6 * th / nh, us_p = 1e6 * tp / np, us_c = 1e6 * tc / nc;
  std::printf(
      "2. Lookup of %d keys, %d chains each, interleaved rounds\n"
      "   one group: %.2f us per Lookup; three groups (full, window, recurrent): %.2f us\n"
      "   three / one: %.2fx (target <= 1.3x)\n"
      "   three groups with a CutChooser (cuts listed and priced in bytes): %.2f us, %.2fx\n\n",
      kKeys, chains, us_p, us_h, us_h / us_p, us_c, us_c / us_p);
}

// 3. Save and Load of a hybrid block set against the same blocks in one group.
void SaveLoadHybridAgainstOneGroup(double seconds) {
  constexpr uint32_t kTokens = 16;
  constexpr size_t kBlocks = 64;
  NamespaceSpec hybrid;
  hybrid.model_id = "saveload-hybrid";
  hybrid.layout = KvLayout{6, 8, 128, DType::kBf16, kTokens, 0, 1};  // 64 KiB per 2 layers
  hybrid.groups = {{GroupKind::kFullAttention, {0, 1}, 0, 0, 0},
                   {GroupKind::kSlidingWindow, {2, 3}, 128, 0, 0},
                   {GroupKind::kRecurrent, {4, 5}, 0, 256 << 10, 64}};
  NamespaceSpec plain;
  plain.model_id = "saveload-plain";
  plain.layout = KvLayout{8, 8, 128, DType::kBf16, kTokens, 0, 1};  // 256 KiB: room for each
  const uint64_t attention = *GroupBlockBytes(GeometryOf(hybrid.layout), hybrid.groups[0]);
  // The engine's block set: the chain's attention, the window, snapshots.
  std::vector<RegionBlock> set;
  std::vector<size_t> set_index;  // each block's position in the chain
  uint64_t at = 0;
  auto add = [&](uint32_t group, size_t i, uint64_t size) {
    RegionBlock b;
    set_index.push_back(i);
    b.offset = at;
    b.size = size;
    b.group = group;
    at += size;
    set.push_back(b);
  };
  for (size_t i = 0; i < kBlocks; ++i) add(0, i, attention);
  for (size_t i = kBlocks - 8; i < kBlocks; ++i) add(1, i, attention);
  // The snapshot at the end: the only restorable cut (the window's blocks
  // before the last 8 are gone, as in the engine).
  add(2, kBlocks - 1, 256 << 10);
  // The same sizes as one chain of one group: keys in a row, each block's
  // parent the one before.
  std::vector<RegionBlock> same = set;
  std::vector<size_t> same_index;
  for (size_t i = 0; i < same.size(); ++i) {
    same[i].group = 0;
    same_index.push_back(i);
  }
  VectorRegion region(2 * at);
  for (size_t i = 0; i < at; ++i) region.bytes()[i] = static_cast<uint8_t>(i * 131);
  auto cache = MakeCache(8 * at + (256ull << 20));
  const NamespaceId h = cache->OpenNamespace(hybrid)->id;
  const NamespaceId p = cache->OpenNamespace(plain)->id;
  auto drain = [](const BlockOutcome& o) {
    if (!o.status.ok())
      std::fprintf(stderr, "block %u: %s\n", o.index, o.status.ToString().c_str());
    return o.status.ok();
  };
  // One Save then one Load of the set; fresh keys each time.
  auto once = [&](const NamespaceId& ns, std::vector<RegionBlock> blocks,
                  const std::vector<size_t>& index, int round, double* save_s, double* load_s) {
    const std::string tag = absl::StrCat("r", round);
    for (size_t j = 0; j < blocks.size(); ++j) {
      RegionBlock& b = blocks[j];
      const size_t i = index[j];
      b.key = KeyOf(tag, i);
      const bool chained = ns == p || b.group == 0;
      b.parent = i == 0 || !chained ? BlockKey() : KeyOf(tag, i - 1);
    }
    auto t = Clock::now();
    if (absl::Status st = SaveFromRegion(*cache, ns, region, blocks, drain); !st.ok()) {
      std::fprintf(stderr, "save: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    *save_s += Since(t);
    for (RegionBlock& b : blocks) b.offset += at;  // load into the upper half
    t = Clock::now();
    if (absl::Status st = LoadIntoRegion(*cache, ns, region, blocks, drain); !st.ok()) {
      std::fprintf(stderr, "load: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    *load_s += Since(t);
    cache->Evict(ns, blocks.size() * 2);
  };
  double hs = 0, hl = 0, ps = 0, pl = 0;
  int rounds = 0;
  const auto start = Clock::now();
  while (Since(start) < seconds || rounds < 4) {
    once(p, same, same_index, rounds, &ps, &pl);
    once(h, set, set_index, rounds, &hs, &hl);
    ++rounds;
  }
  const double gb = static_cast<double>(at) * rounds / 1e9;
  std::printf(
      "3. Save/Load through a host region: %zu blocks, %.1f MiB per set (%zu attention, 8 "
      "window, %zu snapshot), %d rounds\n"
      "   one group: Save %.2f GB/s, Load %.2f GB/s; hybrid: Save %.2f GB/s, Load %.2f GB/s\n"
      "   hybrid / one group: Save %.2fx, Load %.2fx (target >= 0.9x)\n",
      set.size(), at / 1048576.0, kBlocks, set.size() - kBlocks - 8, rounds, gb / ps, gb / pl,
      gb / hs, gb / hl, ps / hs, pl / hl);
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  uint32_t context = 131072;
  int chains = 500;
  double seconds = 1;
  CLI::App app{"Layer groups: bytes held, Lookup and Save/Load against their baselines"};
  app.add_option("--context", context, "tokens of the long chain (part 1)")
      ->check(CLI::Range(16u, 1u << 20));
  app.add_option("--chains", chains, "chains per namespace (part 2)")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "seconds per measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  kvtier::BytesHeldAgainstPlan(context);
  kvtier::LookupThreeGroupsAgainstOne(chains, seconds);
  kvtier::SaveLoadHybridAgainstOneGroup(seconds);
  return 0;
}
