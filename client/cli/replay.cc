#include "client/cli/replay.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/daemon_connection.h"
#include "costmodel/catalog.h"
#include "costmodel/fetch_plan.h"
#include "costmodel/kv_footprint.h"
#include "kvtier/client.h"
#include "kvtier/shared_region.h"
#include "nlohmann/json.hpp"

namespace kvtier {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

struct TraceRequest {
  uint64_t timestamp_ms = 0;
  uint64_t input_length = 0;
  std::vector<uint64_t> hash_ids;
};

std::string KeyOf(uint64_t id) {
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>((id >> (56 - 8 * i)) & 0xff);
  return k;
}

// Deterministic bytes of block `id`: any wrong or foreign byte shows.
void FillBlock(uint64_t id, uint8_t* out, uint64_t n) {
  uint64_t x = id * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(out + i, &x, std::min<uint64_t>(8, n - i));
  }
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "kvtier replay: %s\n", what.c_str());
  return 2;
}

}  // namespace

int RunReplay(const ReplayOptions& o) {
  // The trace.
  std::ifstream in(o.trace);
  if (!in) return Fail("cannot read trace '" + o.trace + "'");
  std::vector<TraceRequest> trace;
  std::string line;
  size_t line_no = 0;
  size_t max_blocks = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("hash_ids") ||
        !j["hash_ids"].is_array() || !j.contains("input_length") ||
        !j["input_length"].is_number_unsigned()) {
      return Fail(absl::StrCat(o.trace, ": line ", line_no,
                               " is not a Mooncake record (input_length, hash_ids)"));
    }
    TraceRequest r;
    r.input_length = j["input_length"].get<uint64_t>();
    if (j.contains("timestamp") && !j["timestamp"].is_number_unsigned()) {
      return Fail(absl::StrCat(o.trace, ": line ", line_no, ": timestamp is not an integer"));
    }
    r.timestamp_ms = j.value("timestamp", uint64_t{0});
    for (const json& id : j["hash_ids"]) {
      if (!id.is_number_unsigned()) {
        return Fail(absl::StrCat(o.trace, ": line ", line_no, ": a hash id is not an integer"));
      }
      r.hash_ids.push_back(id.get<uint64_t>());
    }
    max_blocks = std::max(max_blocks, r.hash_ids.size());
    trace.push_back(std::move(r));
    if (o.limit > 0 && trace.size() >= o.limit) break;
  }
  if (trace.empty()) return Fail("the trace holds no requests");
  if (o.block_bytes == 0 || o.block_bytes % 8 != 0) {
    return Fail("--block-bytes must be a positive multiple of 8");
  }

  // The model's real per-rank layout at the trace's block size.
  absl::StatusOr<costmodel::ModelSpec> model = costmodel::CatalogModel(o.model);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  absl::StatusOr<costmodel::GpuSpec> gpu = costmodel::CatalogGpu(o.gpu);
  if (!gpu.ok()) return Fail(std::string(gpu.status().message()));
  costmodel::Deployment d;
  d.model = *model;
  d.gpu = *gpu;
  d.block_tokens = o.trace_block_tokens;
  if (absl::Status s = d.Validate(); !s.ok()) return Fail(std::string(s.message()));
  const double full_block_bytes = costmodel::ComputeKvFootprint(d).bytes_per_block_per_gpu;
  if (o.block_bytes > full_block_bytes) {
    return Fail(absl::StrCat("--block-bytes ", o.block_bytes, " exceeds the model's block of ",
                             full_block_bytes, " bytes"));
  }

  absl::StatusOr<std::unique_ptr<client::Client>> client = client::Client::Connect(o.address, [&] {
    client::ClientOptions options;
    options.credentials = o.credentials;
    return options;
  }());
  if (!client.ok()) return Fail(std::string(client.status().message()));
  client::NamespaceOptions nso;
  nso.model_id = absl::StrCat("replay/", o.model);
  nso.cost_model = o.model;
  if (d.model.mla.has_value()) {
    nso.layout = {d.model.AttentionLayers(),
                  1,
                  d.model.mla->kv_lora_rank + d.model.mla->qk_rope_head_dim,
                  "bf16",
                  o.trace_block_tokens,
                  0,
                  1};
  } else {
    nso.layout = {d.model.AttentionLayers(),
                  d.model.num_kv_heads,
                  d.model.head_dim,
                  "bf16",
                  o.trace_block_tokens,
                  0,
                  1};
  }
  absl::StatusOr<client::OpenedNamespace> ns = (*client)->OpenNamespace(nso);
  if (!ns.ok()) {
    std::fprintf(stderr, "kvtier replay: OpenNamespace on %s failed: %s\n", o.address.c_str(),
                 ns.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<client::SharedRegion>> staging =
      client::SharedRegion::Create(max_blocks * o.block_bytes);
  if (!staging.ok()) return Fail(std::string(staging.status().message()));
  client::SharedRegion& region = **staging;
  absl::StatusOr<std::string> region_id = (*client)->RegisterMemory(region.path(), region.size());
  if (!region_id.ok()) {
    std::fprintf(stderr, "kvtier replay: RegisterMemory failed: %s\n",
                 region_id.status().ToString().c_str());
    return 1;
  }

  // The replay.
  struct Totals {
    uint64_t blocks = 0, hit = 0, fetched = 0, plan_recomputed = 0, saved = 0;
    uint64_t tokens = 0, hit_tokens = 0;
    uint64_t host = 0, nvme = 0, other_tier = 0;
    uint64_t fetch_all = 0, partial = 0, recompute = 0, no_hit = 0, no_plan = 0;
    uint64_t wrong_bytes = 0, load_failures = 0, save_failures = 0, rpc_errors = 0;
    double saved_seconds = 0, plan_saved_seconds = 0;
  } t;
  std::vector<uint8_t> expect(o.block_bytes);
  const auto start = SteadyClock::now();
  ProgressBar bar("replay", o.progress);
  const double host_bw = d.gpu.host_link_bytes_per_s;
  int rc = 0;
  for (size_t ri = 0; ri < trace.size(); ++ri) {
    const TraceRequest& r = trace[ri];
    if (o.speed > 0) {
      std::this_thread::sleep_until(start + std::chrono::duration<double, std::milli>(
                                                static_cast<double>(r.timestamp_ms) / o.speed));
    }
    std::vector<std::string> keys;
    for (uint64_t id : r.hash_ids) keys.push_back(KeyOf(id));
    client::LookupOptions lo;
    lo.take_lease = true;
    lo.prompt_tokens = static_cast<uint32_t>(r.input_length);
    absl::StatusOr<client::LookupResult> hit = (*client)->Lookup(ns->id, keys, lo);
    if (!hit.ok()) {
      ++t.rpc_errors;
      std::fprintf(stderr, "\nkvtier replay: Lookup failed: %s\n", hit.status().ToString().c_str());
      rc = 1;
      break;
    }
    const uint32_t m = hit->matched;
    uint32_t fetch = m;
    if (hit->plan.has_value()) {
      fetch = std::min(m, hit->plan->fetch_blocks);
      if (m == 0) {
        ++t.no_hit;
      } else if (fetch == m) {
        ++t.fetch_all;
      } else if (fetch == 0) {
        ++t.recompute;
      } else {
        ++t.partial;
      }
    } else {
      ++(m == 0 ? t.no_hit : t.no_plan);
    }
    t.blocks += keys.size();
    t.hit += m;
    t.tokens += r.input_length;
    // Only whole blocks hit, and an engine always computes the last token.
    const uint64_t whole = r.input_length / o.trace_block_tokens;
    t.hit_tokens += std::min<uint64_t>(std::min<uint64_t>(m, whole) * o.trace_block_tokens,
                                       r.input_length > 0 ? r.input_length - 1 : 0);
    // Load the blocks the plan fetches, and check every byte.
    if (fetch > 0) {
      std::vector<client::RegionBlockRef> refs;
      for (uint32_t i = 0; i < fetch; ++i)
        refs.push_back({keys[i], "", i * o.block_bytes, o.block_bytes, {}});
      std::memset(region.data(), 0, fetch * o.block_bytes);
      uint32_t loaded = 0;
      absl::Status s =
          (*client)->Load(ns->id, *region_id, refs, [&](const client::BlockCompletion& c) {
            if (!c.status.ok()) {
              ++t.load_failures;
              return;
            }
            FillBlock(r.hash_ids[c.index], expect.data(), o.block_bytes);
            if (std::memcmp(region.data() + c.index * o.block_bytes, expect.data(),
                            o.block_bytes) != 0) {
              ++t.wrong_bytes;
            }
            ++loaded;
            const std::string& tier = hit->tiers[c.index];
            ++(tier == "host" ? t.host : tier == "nvme" ? t.nvme : t.other_tier);
          });
      if (!s.ok()) ++t.rpc_errors;
      t.fetched += loaded;
      const double fetched_tokens = std::min<double>(loaded * o.trace_block_tokens, r.input_length);
      t.saved_seconds +=
          costmodel::RecomputeSeconds(d, 0, fetched_tokens) - loaded * full_block_bytes / host_bw;
      if (hit->plan.has_value() && loaded == fetch) {  // the plan happened as priced
        t.plan_saved_seconds +=
            costmodel::RecomputeSeconds(d, 0, r.input_length) - hit->plan->total_seconds;
      }
    }
    t.plan_recomputed += m - fetch;
    // "Compute" and save the blocks that were not cached.
    if (m < keys.size()) {
      std::vector<client::RegionBlockRef> refs;
      for (size_t i = m; i < keys.size(); ++i) {
        uint8_t* slot = region.data() + (i - m) * o.block_bytes;
        FillBlock(r.hash_ids[i], slot, o.block_bytes);
        refs.push_back(
            {keys[i], i > 0 ? keys[i - 1] : "", (i - m) * o.block_bytes, o.block_bytes, {}});
      }
      absl::Status s = (*client)->Save(
          ns->id, *region_id, refs,
          [&](const client::BlockCompletion& c) { ++(c.status.ok() ? t.saved : t.save_failures); });
      if (!s.ok()) ++t.rpc_errors;
    }
    if (!hit->lease_id.empty()) (void)(*client)->Release(hit->lease_id);
    if (ri % 50 == 49 || ri + 1 == trace.size()) {
      bar.Update(ri + 1, trace.size(),
                 absl::StrFormat("requests, token hit %.3f",
                                 t.tokens ? static_cast<double>(t.hit_tokens) / t.tokens : 0.0));
    }
  }
  bar.Finish();
  const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  (void)(*client)->UnregisterMemory(*region_id);
  if (t.wrong_bytes > 0 || t.rpc_errors > 0) rc = 1;

  json j = {{"trace", o.trace},
            {"requests", trace.size()},
            {"model", o.model},
            {"gpu", o.gpu},
            {"block_bytes", o.block_bytes},
            {"full_block_bytes", full_block_bytes},
            {"blocks_looked_up", t.blocks},
            {"blocks_hit", t.hit},
            {"blocks_fetched", t.fetched},
            {"blocks_recomputed_by_plan", t.plan_recomputed},
            {"blocks_saved", t.saved},
            {"prefix_hit_blocks_per_request", static_cast<double>(t.hit) / trace.size()},
            {"token_hit_ratio", t.tokens ? static_cast<double>(t.hit_tokens) / t.tokens : 0.0},
            {"tier_mix", {{"host", t.host}, {"nvme", t.nvme}, {"other", t.other_tier}}},
            {"plan_decisions",
             {{"fetch_all", t.fetch_all},
              {"partial", t.partial},
              {"recompute", t.recompute},
              {"no_hit", t.no_hit},
              {"no_plan", t.no_plan}}},
            {"prefill_seconds_saved_estimate", t.saved_seconds},
            {"daemon_plan_seconds_saved", t.plan_saved_seconds},
            {"wrong_bytes_blocks", t.wrong_bytes},
            {"load_failures", t.load_failures},
            {"save_failures", t.save_failures},
            {"rpc_errors", t.rpc_errors},
            {"elapsed_seconds", elapsed}};
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf(
        "replayed %zu requests of %s in %.1f s (model %s, %llu-byte blocks standing for %.0f)\n",
        trace.size(), o.trace.c_str(), elapsed, o.model.c_str(),
        static_cast<unsigned long long>(o.block_bytes), full_block_bytes);
    std::printf("  prefix hits: %llu of %llu blocks (%.2f per request), token hit ratio %.4f\n",
                static_cast<unsigned long long>(t.hit), static_cast<unsigned long long>(t.blocks),
                static_cast<double>(t.hit) / trace.size(),
                t.tokens ? static_cast<double>(t.hit_tokens) / t.tokens : 0.0);
    std::printf(
        "  fetched %llu blocks (host %llu, nvme %llu), %llu left to recompute by the plan\n",
        static_cast<unsigned long long>(t.fetched), static_cast<unsigned long long>(t.host),
        static_cast<unsigned long long>(t.nvme),
        static_cast<unsigned long long>(t.plan_recomputed));
    std::printf(
        "  plans: %llu fetch all, %llu partial, %llu recompute, %llu no hit, %llu without plan\n",
        static_cast<unsigned long long>(t.fetch_all), static_cast<unsigned long long>(t.partial),
        static_cast<unsigned long long>(t.recompute), static_cast<unsigned long long>(t.no_hit),
        static_cast<unsigned long long>(t.no_plan));
    std::printf(
        "  prefill time saved (estimate, %s, full-size blocks over its host link): %.2f s\n",
        o.gpu.c_str(), t.saved_seconds);
    std::printf(
        "  wrong bytes: %llu blocks; load failures %llu; save failures %llu; rpc errors %llu\n",
        static_cast<unsigned long long>(t.wrong_bytes),
        static_cast<unsigned long long>(t.load_failures),
        static_cast<unsigned long long>(t.save_failures),
        static_cast<unsigned long long>(t.rpc_errors));
  }
  return rc;
}

}  // namespace kvtier
