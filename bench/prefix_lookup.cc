// bench/prefix_lookup: in-process BlockCache::Lookup of 128-key prefixes on
// one thread (the work behind every Lookup RPC: lock, chained prefix walk,
// recency update, the result), against the bare baseline of 128 lookups of
// the same keys in an absl::flat_hash_map, measured in the same run. A
// second baseline does those finds with the probes of the keys eight ahead
// prefetched, as the index's walk does (RecordTable::FindRun): the most a
// hash map of these keys gives on this machine.
//
// Each --chains count is measured on its own cache: the default pair puts
// the index's records (about 256 bytes each) in this machine's caches (500
// chains, 16 MB) and well past them (2000 chains, 64 MB), where the walk
// and the bare map both wait on memory and the ratio says little about the
// index's own work.
//
//   build/bench/prefix_lookup [--chains 500,2000] [--seconds 2]
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

namespace kvtier {
namespace {

constexpr int kKeys = 128;

// Prints one row; false on a failure of the cache.
bool Measure(int chains, double seconds) {
  using Clock = std::chrono::steady_clock;
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
    if (!batch->Commit().ok()) return false;
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
  // Baseline 2: the same finds, prefetching the probe of the key 8 ahead.
  constexpr int kAhead = 8;
  auto ahead_one = [&](const std::vector<BlockKey>& chain) {
    for (int k = 0; k < kAhead; ++k) baseline.prefetch(chain[k]);
    for (int k = 0; k < kKeys; ++k) {
      if (k + kAhead < kKeys) baseline.prefetch(chain[k + kAhead]);
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
          if (!kinds[kind](keys[c])) return false;
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
  std::printf("%7d %8d | %10.2f %10.2f %10.2f | %8.3f %8.3f\n", chains, chains * kKeys, ours / 1e6,
              base / 1e6, ahead / 1e6, ours / base, ours / ahead);
  return sink != 42;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  std::vector<int> chains = {500, 2000};
  double seconds = 2;
  CLI::App app{"In-process prefix lookup against a bare hash-map find"};
  app.add_option("--chains", chains, "cached chains, one measurement per count")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "seconds per measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  std::printf("prefix lookup of %d keys per call, one thread; M keys/s\n", kvtier::kKeys);
  std::printf(" chains   blocks |     Lookup       find  prefetched |  /find  /prefetched\n");
  for (int c : chains) {
    if (!kvtier::Measure(c, seconds)) return 1;
  }
  std::printf(
      "Lookup: BlockCache::Lookup; find: flat_hash_map finds of the same keys (the\n"
      "baseline; issue 20's target: Lookup/find >= 0.8); prefetched: the same finds\n"
      "with the probes 8 keys ahead prefetched, like for like with the index's walk.\n");
  return 0;
}
