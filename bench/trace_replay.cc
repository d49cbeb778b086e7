// bench/trace_replay: replays shared/traces/synthetic_trace.jsonl (Mooncake
// FAST'25, 512 tokens per block) through the store at cache sizes of 10% and
// 25% of the distinct blocks. For each request: Lookup its hash ids, count the
// matched prefix as hit tokens, then Put the missing suffix as a chain. Side
// by side: the real BlockCache (LRU restricted to leaves: never strands) and
// a plain-LRU simulation of the same capacity (evicts the least recently used
// block whatever its children), which strands blocks: cached, but behind a
// missing parent, so no prefix lookup can reach them.
//
//   build/bench/trace_replay [--trace ../shared/traces/synthetic_trace.jsonl]
#include <cstdio>
#include <fstream>
#include <list>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_map.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "storage/block_cache.h"

namespace kvtier {
namespace {

constexpr uint64_t kTokensPerBlock = 512;
constexpr uint64_t kBlockBytes = 4096;  // stand-in payload; the policy sees blocks, not bytes

struct Request {
  uint64_t input_tokens = 0;
  std::vector<uint64_t> ids;
};

// Tokens of block i of a request (the last block may be partial).
uint64_t BlockTokens(const Request& r, size_t i) {
  if (i + 1 < r.ids.size()) return kTokensPerBlock;
  const uint64_t rest = r.input_tokens - kTokensPerBlock * (r.ids.size() - 1);
  return std::min<uint64_t>(std::max<uint64_t>(rest, 1), kTokensPerBlock);
}

BlockKey KeyOf(uint64_t id) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(id >> (8 * i));
  return *BlockKey::Create(absl::string_view(bytes, 8));
}

struct Result {
  double hit_ratio = 0;      // token-weighted
  double mean_stranded = 0;  // blocks, sampled after every request
  uint64_t max_stranded = 0;
};

Result ReplayLeafFirst(const std::vector<Request>& trace, uint64_t capacity_blocks) {
  BlockCacheOptions o;
  o.slab_bytes = 64 * 1024;
  o.max_block_bytes = kBlockBytes;
  o.host_bytes = (capacity_blocks * kBlockBytes + o.slab_bytes - 1) / o.slab_bytes * o.slab_bytes;
  SystemClock clock;
  auto cache = *BlockCache::Create(o, &clock);
  NamespaceSpec spec{"trace", KvLayout{1, 1, 1, DType::kFp8E4m3, 2048, 0, 1}, "", "", "",
                     {}};  // 4 KiB
  const NamespaceId ns = cache->OpenNamespace(spec)->id;
  std::vector<uint8_t> payload(kBlockBytes, 7);
  uint64_t hit = 0, total = 0, stranded_sum = 0, stranded_max = 0;
  for (const Request& r : trace) {
    std::vector<BlockKey> keys;
    for (uint64_t id : r.ids) keys.push_back(KeyOf(id));
    const size_t k = cache->Lookup(ns, keys, false, absl::ZeroDuration())->blocks.size();
    for (size_t i = 0; i < r.ids.size(); ++i) {
      total += BlockTokens(r, i);
      if (i < k) hit += BlockTokens(r, i);
    }
    if (k < keys.size()) {
      auto batch = *cache->BeginPut(ns);
      bool ok = true;
      for (size_t i = k; i < keys.size() && ok; ++i) {
        ok = batch->StartBlock(keys[i], i == 0 ? BlockKey() : keys[i - 1], kBlockBytes).ok() &&
             batch->Append(payload).ok();
      }
      if (ok) batch->Commit().IgnoreError();
    }
    const uint64_t stranded = cache->Snapshot(true).stranded_blocks;
    stranded_sum += stranded;
    stranded_max = std::max(stranded_max, stranded);
  }
  return {static_cast<double>(hit) / total, static_cast<double>(stranded_sum) / trace.size(),
          stranded_max};
}

Result ReplayPlainLru(const std::vector<Request>& trace, uint64_t capacity_blocks) {
  std::list<uint64_t> lru;  // front = most recent
  absl::flat_hash_map<uint64_t, std::pair<std::list<uint64_t>::iterator, uint64_t>> cached;
  // id -> (position, parent id + 1; 0 for a root)
  uint64_t hit = 0, total = 0, stranded_sum = 0, stranded_max = 0;
  for (const Request& r : trace) {
    size_t k = 0;
    while (k < r.ids.size() && cached.contains(r.ids[k])) ++k;
    for (size_t i = 0; i < r.ids.size(); ++i) {
      total += BlockTokens(r, i);
      if (i < k) hit += BlockTokens(r, i);
    }
    for (size_t i = 0; i < r.ids.size(); ++i) {
      const uint64_t id = r.ids[i];
      if (auto it = cached.find(id); it != cached.end()) {
        lru.splice(lru.begin(), lru, it->second.first);  // touch
        continue;
      }
      if (i < k) continue;
      if (lru.size() >= capacity_blocks) {
        cached.erase(lru.back());
        lru.pop_back();
      }
      lru.push_front(id);
      cached[id] = {lru.begin(), i == 0 ? 0 : r.ids[i - 1] + 1};
    }
    uint64_t stranded = 0;
    for (const auto& [id, v] : cached) {
      if (v.second != 0 && !cached.contains(v.second - 1)) ++stranded;
    }
    stranded_sum += stranded;
    stranded_max = std::max(stranded_max, stranded);
  }
  return {static_cast<double>(hit) / total, static_cast<double>(stranded_sum) / trace.size(),
          stranded_max};
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  std::string path = "../shared/traces/synthetic_trace.jsonl";
  CLI::App app{"Replay a Mooncake trace through the store"};
  app.add_option("--trace", path, "the trace (JSON lines)")->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  std::vector<Request> trace;
  absl::flat_hash_map<uint64_t, bool> distinct;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    Request r;
    r.input_tokens = j["input_length"].get<uint64_t>();
    r.ids = j["hash_ids"].get<std::vector<uint64_t>>();
    for (uint64_t id : r.ids) distinct[id] = true;
    if (!r.ids.empty()) trace.push_back(std::move(r));
  }
  std::printf("%zu requests, %zu distinct blocks of %llu tokens\n", trace.size(), distinct.size(),
              static_cast<unsigned long long>(kTokensPerBlock));
  std::printf("%-6s %8s | %-22s | %-22s\n", "size", "blocks", "leaf-first LRU (ours)",
              "plain LRU (baseline)");
  std::printf("%-6s %8s | %9s %12s | %9s %12s\n", "", "", "hit ratio", "stranded", "hit ratio",
              "stranded");
  for (double frac : {0.10, 0.25}) {
    const uint64_t cap = static_cast<uint64_t>(frac * distinct.size());
    const Result ours = ReplayLeafFirst(trace, cap);
    const Result base = ReplayPlainLru(trace, cap);
    std::printf("%-6s %8llu | %9.4f %5.0f (%4llu) | %9.4f %5.0f (%4llu)\n",
                frac < 0.2 ? "10%" : "25%", static_cast<unsigned long long>(cap), ours.hit_ratio,
                ours.mean_stranded, static_cast<unsigned long long>(ours.max_stranded),
                base.hit_ratio, base.mean_stranded,
                static_cast<unsigned long long>(base.max_stranded));
  }
  std::printf(
      "(token-weighted prefix hit ratio; stranded = cached blocks whose parent is not "
      "cached: mean per request (max), 512-token blocks)\n");
  return 0;
}
