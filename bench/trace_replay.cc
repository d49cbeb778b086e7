// bench/trace_replay: replays a Mooncake-format trace (JSON lines with
// input_length and hash_ids, 512 tokens per block) through the real store
// with each eviction policy, against the offline optimum computed in the
// same run.
//
// For each request: Lookup its block keys, count the matched prefix as hit
// tokens, then Put the missing suffix as a chain; a partial last block is put
// a little shorter than a full one (same slab class), as an engine would.
//
// Scenario 1 (one model): capacity 5%, 10% and 25% of the distinct blocks.
// Each policy's token-weighted prefix hit ratio, its ratio to the offline
// optimum (Belady restricted to leaves: LeafBelady), and the prefill seconds
// its hits save for Llama-3.1-8B on an H100 (MFU 0.5). Plain LRU (evicts any
// block, leaves or not) shows what stranding costs.
//
// Scenario 2 (two models over one tier): each conversation (requests sharing
// a first block) goes to one of two namespaces, shaped after Llama-3.1-70B
// and Llama-3.2-1B: a hit on the first saves 5-6x more prefill seconds per
// KV byte (the planner's pricing; the daemon passes it to the store). Both
// use the same block bytes here, since the store's slab classes keep blocks
// of different sizes in different slots. Scored by prefill seconds saved
// per byte of hits, against a greedy value-weighted LeafBelady (weighted
// caching has no simple exact optimum).
//
//   build/bench/trace_replay [--trace ../shared/traces/synthetic_trace.jsonl]
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/leaf_belady.h"
#include "costmodel/catalog.h"
#include "costmodel/fetch_plan.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "storage/block_cache.h"

namespace kvtier {
namespace {

constexpr uint64_t kTokensPerBlock = 512;
constexpr uint64_t kBlockBytes = 16 * 1024;         // stand-in payload
constexpr uint64_t kPartialBlockBytes = 15 * 1024;  // same slab class as a full one

struct Request {
  uint64_t input_tokens = 0;
  std::vector<uint64_t> ids;
  std::vector<uint64_t> next_use;  // per block: next request using it
  int model = 0;                   // scenario 2: which namespace
};

// Tokens of block i of a request (the last block may be partial).
uint64_t BlockTokens(const Request& r, size_t i) {
  if (i + 1 < r.ids.size()) return kTokensPerBlock;
  const uint64_t rest = r.input_tokens - kTokensPerBlock * (r.ids.size() - 1);
  return std::min<uint64_t>(std::max<uint64_t>(rest, 1), kTokensPerBlock);
}

// Adds the tokens of `r` to `total` and returns those of its first k blocks.
uint64_t CountHitTokens(const Request& r, size_t k, uint64_t* total) {
  uint64_t hit = 0;
  for (size_t i = 0; i < r.ids.size(); ++i) {
    *total += BlockTokens(r, i);
    if (i < k) hit += BlockTokens(r, i);
  }
  return hit;
}

bool Partial(const Request& r, size_t i) {
  return i + 1 == r.ids.size() && BlockTokens(r, i) < kTokensPerBlock;
}

BlockKey KeyOf(uint64_t id) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(id >> (8 * i));
  return *BlockKey::Create(absl::string_view(bytes, 8));
}

costmodel::Deployment OnH100(const char* model) {
  costmodel::Deployment d;
  d.model = *costmodel::CatalogModel(model);
  d.gpu = *costmodel::CatalogGpu("h100-sxm");
  return d;
}

// Prefill seconds a hit on the first `tokens` tokens saves.
double SavedSeconds(const costmodel::Deployment& d, uint64_t tokens) {
  return tokens == 0 ? 0 : costmodel::RecomputeSeconds(d, 0, static_cast<double>(tokens));
}

struct Score {
  double hit_ratio = 0;  // token-weighted
  uint64_t hit_blocks = 0;
  uint64_t nvme_hit_blocks = 0;     // matched while held only on NVMe
  uint64_t nvme_bytes_written = 0;  // with an NVMe tier
  double replay_seconds = 0;        // wall time of the replay (Lookups and Puts)
  double saved_seconds = 0;
  double mean_stranded = 0;  // blocks, sampled after every request
  uint64_t max_stranded = 0;
};

// One model, or two (by Request::model). `saved(model, tokens)`: what a hit
// on the first `tokens` tokens of a request saves.
struct Scenario {
  std::vector<std::string> names;
  std::vector<double> value_per_byte;  // two models: given to the store
  std::function<double(int model, uint64_t tokens)> saved;
};

Score ReplayStore(const std::vector<Request>& trace, uint64_t capacity_blocks,
                  const std::string& policy, const Scenario& sc,
                  const std::optional<NvmeTierOptions>& nvme = std::nullopt) {
  BlockCacheOptions o;
  o.nvme = nvme;
  o.slab_bytes = 1024 * 1024;
  o.max_block_bytes = kBlockBytes;
  o.host_bytes = (capacity_blocks * kBlockBytes + o.slab_bytes - 1) / o.slab_bytes * o.slab_bytes;
  o.eviction_policy = policy;
  SystemClock clock;
  absl::StatusOr<std::unique_ptr<BlockCache>> created = BlockCache::Create(o, &clock);
  if (!created.ok()) {
    std::fprintf(stderr, "cannot create the store: %s\n", created.status().ToString().c_str());
    std::exit(2);
  }
  std::unique_ptr<BlockCache> cache = *std::move(created);
  std::vector<NamespaceId> ns;
  for (size_t m = 0; m < sc.names.size(); ++m) {
    // 16 KiB blocks: 2 x 1 layer x 1 head x 64 dim x 64 tokens x 2 bytes.
    NamespaceSpec spec{sc.names[m], KvLayout{1, 1, 64, DType::kBf16, 64, 0, 1}, "", "", "", {}};
    ns.push_back(cache->OpenNamespace(spec)->id);
    if (sc.names.size() > 1)
      cache->SetRetentionValue(ns.back(), sc.value_per_byte[m]).IgnoreError();
  }
  std::vector<uint8_t> payload(kBlockBytes, 7);
  uint64_t hit = 0, total = 0, stranded_sum = 0, stranded_max = 0, hit_blocks = 0,
           nvme_hit_blocks = 0;
  double saved = 0, replay_seconds = 0;
  for (const Request& r : trace) {
    const absl::Time start = absl::Now();
    const int m = sc.names.size() > 1 ? r.model : 0;
    const NamespaceId& n = ns[m];
    std::vector<BlockKey> keys;
    for (uint64_t id : r.ids) keys.push_back(KeyOf(id));
    const std::vector<MatchedBlock> matched =
        cache->Lookup(n, keys, false, absl::ZeroDuration())->blocks;
    const size_t k = matched.size();
    for (const MatchedBlock& b : matched) nvme_hit_blocks += b.on_host ? 0 : 1;
    const uint64_t hit_tokens = CountHitTokens(r, k, &total);
    hit += hit_tokens;
    hit_blocks += k;
    saved += sc.saved(m, hit_tokens);
    if (k < keys.size()) {
      auto batch = *cache->BeginPut(n);
      bool ok = true;
      for (size_t i = k; i < keys.size() && ok; ++i) {
        const uint64_t bytes = Partial(r, i) ? kPartialBlockBytes : kBlockBytes;
        ok = batch->StartBlock(keys[i], i == 0 ? BlockKey() : keys[i - 1], bytes).ok() &&
             batch->Append(absl::MakeConstSpan(payload).subspan(0, bytes)).ok();
      }
      if (ok) batch->Commit().IgnoreError();
    }
    if (nvme.has_value()) cache->RunMoverOnce();  // demotes under host pressure
    replay_seconds += absl::ToDoubleSeconds(absl::Now() - start);
    const uint64_t stranded = cache->Snapshot(true).stranded_blocks;
    stranded_sum += stranded;
    stranded_max = std::max(stranded_max, stranded);
  }
  const uint64_t written = cache->Snapshot().counters.bytes_host_to_nvme;
  return {.hit_ratio = static_cast<double>(hit) / total,
          .hit_blocks = hit_blocks,
          .nvme_hit_blocks = nvme_hit_blocks,
          .nvme_bytes_written = written,
          .replay_seconds = replay_seconds,
          .saved_seconds = saved,
          .mean_stranded = static_cast<double>(stranded_sum) / trace.size(),
          .max_stranded = stranded_max};
}

Score ReplayOptimum(const std::vector<Request>& trace, uint64_t capacity_blocks,
                    const Scenario& sc) {
  const bool weighted = sc.names.size() > 1;
  LeafBelady opt(capacity_blocks, weighted);
  uint64_t hit = 0, total = 0;
  double saved = 0;
  for (uint64_t r = 0; r < trace.size(); ++r) {
    const Request& q = trace[r];
    const int m = weighted ? q.model : 0;
    const size_t k = opt.Request(r, q.ids, q.next_use, weighted ? sc.value_per_byte[m] : 1.0);
    const uint64_t hit_tokens = CountHitTokens(q, k, &total);
    hit += hit_tokens;
    saved += sc.saved(m, hit_tokens);
  }
  return {.hit_ratio = static_cast<double>(hit) / total, .saved_seconds = saved};
}

// Plain LRU over all blocks, leaves or not: strands blocks behind evicted
// parents, which no prefix lookup can reach.
Score ReplayPlainLru(const std::vector<Request>& trace, uint64_t capacity_blocks) {
  std::list<uint64_t> lru;  // front = most recent
  absl::flat_hash_map<uint64_t, std::pair<std::list<uint64_t>::iterator, uint64_t>> cached;
  // id -> (position, parent id + 1; 0 for a root)
  uint64_t hit = 0, total = 0, stranded_sum = 0, stranded_max = 0;
  for (const Request& r : trace) {
    size_t k = 0;
    while (k < r.ids.size() && cached.contains(r.ids[k])) ++k;
    hit += CountHitTokens(r, k, &total);
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
  return {.hit_ratio = static_cast<double>(hit) / total,
          .mean_stranded = static_cast<double>(stranded_sum) / trace.size(),
          .max_stranded = stranded_max};
}

// Fills Request::next_use; returns the number of distinct blocks.
size_t IndexNextUses(std::vector<Request>* trace) {
  absl::flat_hash_map<uint64_t, uint64_t> next;
  for (size_t r = trace->size(); r-- > 0;) {
    Request& q = (*trace)[r];
    q.next_use.resize(q.ids.size());
    for (size_t i = 0; i < q.ids.size(); ++i) {
      auto it = next.find(q.ids[i]);
      q.next_use[i] = it == next.end() ? LeafBelady::kNever : it->second;
    }
    for (uint64_t id : q.ids) next[id] = r;
  }
  return next.size();
}

const char* FractionName(double f) { return f < 0.07 ? "5%" : f < 0.2 ? "10%" : "25%"; }

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  std::string path = "../shared/traces/synthetic_trace.jsonl";
  std::string nvme_dir = "/tmp";
  CLI::App app{"Replay a Mooncake trace through the store with each eviction policy"};
  app.add_option("--trace", path, "the trace (JSON lines)")->check(CLI::ExistingFile);
  app.add_option("--nvme-dir", nvme_dir,
                 "scenario 3: where to make the NVMe tier's temporary directory (not tmpfs)")
      ->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  std::vector<Request> trace;
  std::string line;
  size_t bad = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("input_length") || !j.contains("hash_ids")) {
      ++bad;
      continue;
    }
    Request r;
    r.input_tokens = j["input_length"].get<uint64_t>();
    r.ids = j["hash_ids"].get<std::vector<uint64_t>>();
    // Conversations (requests sharing a first block) stay with one model.
    if (!r.ids.empty()) r.model = static_cast<int>((r.ids[0] * 0x9e3779b97f4a7c15ULL) >> 63);
    if (!r.ids.empty()) trace.push_back(std::move(r));
  }
  if (trace.empty()) {
    std::fprintf(stderr, "%s holds no request with hash_ids (%zu lines skipped)\n", path.c_str(),
                 bad);
    return 2;
  }
  const size_t distinct = IndexNextUses(&trace);
  std::printf("%s: %zu requests, %zu distinct blocks of %llu tokens (%zu lines skipped)\n",
              path.c_str(), trace.size(), distinct,
              static_cast<unsigned long long>(kTokensPerBlock), bad);

  const costmodel::Deployment llama8b = OnH100("llama-3.1-8b");
  const Scenario one{
      {"llama-3.1-8b"}, {1.0}, [&](int, uint64_t tokens) { return SavedSeconds(llama8b, tokens); }};
  std::printf(
      "\nScenario 1: one model (Llama-3.1-8B on an H100); token-weighted prefix hit ratio, its "
      "ratio to the\noffline optimum (leaf-restricted Belady, same run), prefill seconds the "
      "hits save\n");
  std::printf("%-5s %7s | %-25s | %-25s | %-15s | %-17s\n", "size", "blocks", "value (default)",
              "leaf-LRU (reference)", "optimum", "plain LRU");
  for (double frac : {0.05, 0.10, 0.25}) {
    const uint64_t cap = static_cast<uint64_t>(frac * static_cast<double>(distinct));
    const Score opt = ReplayOptimum(trace, cap, one);
    const Score value = ReplayStore(trace, cap, "value", one);
    const Score lru = ReplayStore(trace, cap, "lru", one);
    const Score plain = ReplayPlainLru(trace, cap);
    std::printf(
        "%-5s %7llu | %.4f %.3fx %7.1f s | %.4f %.3fx %7.1f s | %.4f %7.1f s | %.4f strands "
        "%4.0f\n",
        FractionName(frac), static_cast<unsigned long long>(cap), value.hit_ratio,
        value.hit_ratio / opt.hit_ratio, value.saved_seconds, lru.hit_ratio,
        lru.hit_ratio / opt.hit_ratio, lru.saved_seconds, opt.hit_ratio, opt.saved_seconds,
        plain.hit_ratio, plain.mean_stranded);
    std::printf("      store time (Lookups and Puts): value %.3f s, leaf-LRU %.3f s: %.2fx\n",
                value.replay_seconds, lru.replay_seconds,
                value.replay_seconds / lru.replay_seconds);
    if (value.max_stranded != 0 || lru.max_stranded != 0) {
      std::printf("  BROKEN: the store stranded blocks (value %llu, lru %llu)\n",
                  static_cast<unsigned long long>(value.max_stranded),
                  static_cast<unsigned long long>(lru.max_stranded));
    }
  }

  // What a hit saves per KV byte, as the daemon's planner prices it
  // (recompute seconds of 4096 tokens per KV byte). The bench's blocks are
  // the same size for both: a hit scores its value per byte times the
  // bench's bytes per token.
  Scenario two{{"llama-3.1-70b", "llama-3.2-1b"}, {}, nullptr};
  for (const std::string& name : two.names) {
    const costmodel::Deployment d = OnH100(name.c_str());
    const double bytes_per_token =
        2.0 * d.model.num_layers * d.model.num_kv_heads * d.model.head_dim * d.kv_bytes_per_element;
    two.value_per_byte.push_back(SavedSeconds(d, 4096) / 4096 / bytes_per_token);
  }
  two.saved = [&](int m, uint64_t tokens) {
    return static_cast<double>(tokens) * two.value_per_byte[m] *
           (static_cast<double>(kBlockBytes) / kTokensPerBlock);
  };
  std::printf(
      "\nScenario 2: two models over one tier (Llama-3.1-70B and Llama-3.2-1B shapes on an H100; "
      "a hit on\nthe first saves %.1fx more per KV byte); prefill seconds the hits save at the "
      "bench's KV bytes per token\n",
      two.value_per_byte[0] / two.value_per_byte[1]);
  std::printf("%-5s %7s | %-19s | %-12s | %-26s\n", "size", "blocks", "value (default)", "leaf-LRU",
              "greedy weighted optimum");
  for (double frac : {0.05, 0.10, 0.25}) {
    const uint64_t cap = static_cast<uint64_t>(frac * static_cast<double>(distinct));
    const Score value = ReplayStore(trace, cap, "value", two);
    const Score lru = ReplayStore(trace, cap, "lru", two);
    const Score opt = ReplayOptimum(trace, cap, two);
    std::printf("%-5s %7llu | %8.1f ms %.2fx | %8.1f ms | %8.1f ms (value %.3fx)\n",
                FractionName(frac), static_cast<unsigned long long>(cap), 1e3 * value.saved_seconds,
                value.saved_seconds / lru.saved_seconds, 1e3 * lru.saved_seconds,
                1e3 * opt.saved_seconds, value.saved_seconds / opt.saved_seconds);
  }
  std::printf(
      "(ratios: value policy against leaf-LRU, and against the greedy weighted optimum, same "
      "run)\n");

  // Scenario 3: the host tier at 5% of the distinct blocks over an NVMe tier
  // of 20% (write_back: blocks go to NVMe under host pressure, after their
  // second use).
  std::printf(
      "\nScenario 3: host 5%% + NVMe 20%% (write_back, admit after 2 uses), one model: hit ratio, "
      "bytes written to NVMe,\nblocks hit on NVMe, and NVMe bytes written per block hit (any "
      "tier) and per NVMe hit\n");
  std::printf("%-9s | %9s | %9s | %9s | %13s | %13s\n", "policy", "hit ratio", "NVMe MiB",
              "NVMe hits", "written / hit", "/ NVMe hit");
  double per_hit[2] = {0, 0};
  int row = 0;
  for (const char* policy : {"value", "lru"}) {
    std::string dir = nvme_dir + "/kvtier-trace-replay-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      std::perror("mkdtemp");
      return 2;
    }
    const uint64_t host_cap = static_cast<uint64_t>(0.05 * static_cast<double>(distinct));
    const uint64_t nvme_cap = static_cast<uint64_t>(0.20 * static_cast<double>(distinct));
    NvmeTierOptions nvme;
    nvme.store.dirs = {dir};
    nvme.store.slab_bytes = 1024 * 1024;
    nvme.store.bytes_per_dir = (nvme_cap * (kBlockBytes + 4096) / nvme.store.slab_bytes + 1) *
                               nvme.store.slab_bytes;  // a 4 KiB header per slot
    nvme.start_mover = false;
    const Score s = ReplayStore(trace, host_cap, policy, one, nvme);
    std::filesystem::remove_all(dir);
    per_hit[row++] = static_cast<double>(s.nvme_bytes_written) / static_cast<double>(s.hit_blocks);
    std::printf("%-9s | %9.4f | %9.1f | %9llu | %11.0f B | %11.0f B\n", policy, s.hit_ratio,
                static_cast<double>(s.nvme_bytes_written) / (1 << 20),
                static_cast<unsigned long long>(s.nvme_hit_blocks), per_hit[row - 1],
                static_cast<double>(s.nvme_bytes_written) /
                    static_cast<double>(std::max<uint64_t>(s.nvme_hit_blocks, 1)));
  }
  std::printf("(value writes %.2fx the NVMe bytes per hit of leaf-LRU)\n", per_hit[0] / per_hit[1]);
  return 0;
}
