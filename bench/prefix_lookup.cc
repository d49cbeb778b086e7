// bench/prefix_lookup: in-process BlockCache::Lookup of 128-key prefixes on
// one thread (the work behind every Lookup RPC: lock, chained prefix walk,
// recency update), against the bare baseline of 128 lookups of the same
// keys in an absl::flat_hash_map, measured in the same run. A second
// baseline does those finds with the probes of the keys four ahead
// prefetched, as the index's walk does (PrefixIndex::MatchChain): the most
// a hash map of these keys gives on this machine.
//
//   build/bench/prefix_lookup [--chains 2000] [--seconds 2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "storage/block_cache.h"

int main(int argc, char** argv) {
  using namespace kvtier;
  using Clock = std::chrono::steady_clock;
  int chains = 2000;
  double seconds = 2;
  CLI::App app{"In-process prefix lookup against a bare hash-map find"};
  app.add_option("--chains", chains, "cached chains")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "seconds per measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  constexpr int kKeys = 128;
  BlockCacheOptions o;
  o.host_bytes = static_cast<uint64_t>(chains) * kKeys * 4096 + (64ull << 20);
  o.slab_bytes = 64ull << 20;
  o.max_block_bytes = 64ull << 20;
  SystemClock clock;
  auto cache = *BlockCache::Create(o, &clock);
  NamespaceSpec spec{"bench", KvLayout{1, 1, 128, DType::kBf16, 16, 0, 1}, "", "", "", {}};
  const NamespaceId ns = cache->OpenNamespace(spec)->id;
  std::vector<std::vector<BlockKey>> keys(chains);
  absl::flat_hash_map<BlockKey, int> baseline;
  std::vector<uint8_t> data(4096, 1);
  for (int c = 0; c < chains; ++c) {
    auto batch = *cache->BeginPut(ns);
    BlockKey parent;
    for (int k = 0; k < kKeys; ++k) {
      // 16-byte keys, like a 128-bit chained hash.
      const std::string raw = absl::StrCat("c", c, "-", k, "-padding-bytes").substr(0, 16);
      keys[c].push_back(*BlockKey::Create(raw));
      batch->StartBlock(keys[c].back(), parent, 4096).IgnoreError();
      batch->Append(data).IgnoreError();
      parent = keys[c].back();
      baseline[keys[c].back()] = k;
    }
    if (!batch->Commit().ok()) return 1;
  }
  // Each kind looks up one chain per call; rounds of the three kinds in turn,
  // so a slow spell of this shared machine lands on all of them.
  uint64_t sink = 0;
  auto ours_one = [&](const std::vector<BlockKey>& chain) {
    auto r = cache->Lookup(ns, chain, false, absl::ZeroDuration());
    return r.ok() && r->blocks.size() == kKeys;
  };
  // Baseline: the same keys, found one by one in a flat hash map.
  auto base_one = [&](const std::vector<BlockKey>& chain) {
    for (const BlockKey& k : chain) sink += baseline.find(k)->second;
    return true;
  };
  // Baseline 2: the same finds, prefetching the probe of the key 4 ahead.
  auto ahead_one = [&](const std::vector<BlockKey>& chain) {
    for (int k = 0; k < 4; ++k) baseline.prefetch(chain[k]);
    for (int k = 0; k < kKeys; ++k) {
      if (k + 4 < kKeys) baseline.prefetch(chain[k + 4]);
      sink += baseline.find(chain[k])->second;
    }
    return true;
  };
  constexpr int kRounds = 10;
  std::function<bool(const std::vector<BlockKey>&)> kinds[3] = {ours_one, base_one, ahead_one};
  double keys_done[3] = {0, 0, 0}, secs[3] = {0, 0, 0};
  int c = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (int kind = 0; kind < 3; ++kind) {
      const auto t0 = Clock::now();
      double elapsed = 0;
      while (elapsed < seconds / kRounds) {
        for (int i = 0; i < 256; ++i) {
          if (!kinds[kind](keys[c])) return 1;
          keys_done[kind] += kKeys;
          c = (c + 1) % chains;
        }
        elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      }
      secs[kind] += elapsed;
    }
  }
  const double ours = keys_done[0] / secs[0];
  const double base = keys_done[1] / secs[1];
  const double ahead = keys_done[2] / secs[2];
  std::printf("prefix lookup of %d keys, %d chains (%d blocks), one thread\n", kKeys, chains,
              chains * kKeys);
  std::printf("BlockCache::Lookup             %8.2f M keys/s\n", ours / 1e6);
  std::printf("flat_hash_map find             %8.2f M keys/s (baseline)\n", base / 1e6);
  std::printf("flat_hash_map find, prefetched %8.2f M keys/s (the map's limit)\n", ahead / 1e6);
  std::printf("ratio to the find              %8.3f   (issue 20's target: >= 0.8)\n", ours / base);
  std::printf("ratio to the prefetched find   %8.3f   (like for like: both prefetch)\n",
              ours / ahead);
  return sink == 42 ? 3 : 0;
}
