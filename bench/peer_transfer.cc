// Prefill-to-decode block transfer between two in-process daemons over UCX
// (transports from UCX_TLS; loopback with UCX_NET_DEVICES=lo). Each round the
// decode daemon drops the blocks and the prefill daemon pushes them again;
// the best round is reported as end-to-end bandwidth (the Transfer RPC:
// Hello-less Stage, puts, flush, checksum verification, Commit) and as
// transport bandwidth (the puts alone, as the daemon timed them).
// bench/peer_transfer_vs_ucx_perftest.sh runs it beside ucx_perftest with the
// same transports and message size and prints the ratios.
//
//   peer_transfer [--block-bytes N] [--blocks N] [--rounds N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kvtier/client.h"
#include "server/config.h"
#include "server/daemon.h"

namespace {

std::string Bytes(size_t n, uint64_t seed) {
  std::string out(n, '\0');
  uint64_t x = seed | 1;
  for (size_t i = 0; i < n; i += 8) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::memcpy(out.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t block_bytes = 1 << 20;
  int blocks = 128;
  int rounds = 5;
  CLI::App app{"Prefill-to-decode transfer between two daemons over UCX"};
  app.add_option("--block-bytes", block_bytes, "bytes per block")->check(CLI::PositiveNumber);
  app.add_option("--blocks", blocks, "blocks per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds (the best is reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (block_bytes == 0 || block_bytes % 512 != 0 || blocks <= 0 || rounds <= 0) {
    std::fprintf(stderr, "block bytes must be a positive multiple of 512\n");
    return 2;
  }
  const uint64_t arena = std::max<uint64_t>(uint64_t{256} << 20, 2 * block_bytes * blocks);
  auto start = [&](const char* role) {
    kvtier::DaemonConfig c = kvtier::DefaultConfig(8ull << 30);
    c.listen = "127.0.0.1:0";
    c.metrics_listen = "off";
    c.host_tier_bytes = arena;
    c.host_slab_bytes = std::max<uint64_t>(block_bytes, 1 << 20);
    c.max_block_bytes = block_bytes;
    c.max_message_bytes = std::max<uint64_t>(16 << 20, 2 * block_bytes);
    c.nvme_dirs = "";
    c.gpu_tier = "off";
    c.costmodel_probe_tiers = false;
    c.log_level = "warn";
    c.peer_role = role;
    c.peer_transport = "ucx";
    c.peer_timeout_ms = 600'000;
    return kvtier::Daemon::Start(c);
  };
  auto prefill = start("prefill");
  auto decode = start("decode");
  if (!prefill.ok() || !decode.ok()) {
    std::fprintf(stderr, "daemons did not start: %s %s\n", prefill.status().ToString().c_str(),
                 decode.status().ToString().c_str());
    return 1;
  }
  kvtier::client::ClientOptions co;
  co.timeout = absl::Minutes(10);
  auto pc = *kvtier::client::Client::Connect((*prefill)->listen_address(), co);
  auto dc = *kvtier::client::Client::Connect((*decode)->listen_address(), co);
  kvtier::client::NamespaceOptions ns_opts;
  ns_opts.model_id = "bench-pd";
  ns_opts.layout = {1, 1, 128, "bf16", static_cast<uint32_t>(block_bytes / 512), 0, 1};
  auto ns = pc->OpenNamespace(ns_opts);
  if (!ns.ok() || !dc->OpenNamespace(ns_opts).ok()) {
    std::fprintf(stderr, "OpenNamespace failed\n");
    return 1;
  }
  std::vector<std::string> keys;
  for (int i = 0; i < blocks; ++i) {
    keys.push_back(absl::StrCat("b", i));
    std::vector<std::string> one = {Bytes(block_bytes, i)};
    std::vector<std::string> key = {keys.back()};
    if (!pc->Put(ns->id, key, one, i == 0 ? "" : keys[i - 1]).ok()) {
      std::fprintf(stderr, "Put failed\n");
      return 1;
    }
  }
  double best_e2e = 0, best_transport = 0;
  std::string lanes;
  for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms the connection up
    if (r > 0 && !dc->Delete(ns->id, {keys[0]}, /*recursive=*/true).ok()) {
      std::fprintf(stderr, "Delete on the decode daemon failed\n");
      return 1;
    }
    const absl::Time t0 = absl::Now();
    auto res = pc->Transfer(ns->id, keys, (*decode)->listen_address(),
                            kvtier::client::TransferDirection::kPush);
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
    if (!res.ok()) {
      std::fprintf(stderr, "Transfer failed: %s\n", res.status().ToString().c_str());
      return 1;
    }
    for (const auto& b : res->blocks) {
      if (!b.status.ok()) {
        std::fprintf(stderr, "block %u: %s\n", b.index, b.status.ToString().c_str());
        return 1;
      }
    }
    if (r == 0) continue;
    const double bytes = static_cast<double>(res->bytes_moved);
    if (res->bytes_moved != block_bytes * blocks) {
      std::fprintf(stderr, "moved %llu bytes, expected %llu\n",
                   static_cast<unsigned long long>(res->bytes_moved),
                   static_cast<unsigned long long>(block_bytes * blocks));
      return 1;
    }
    best_e2e = std::max(best_e2e, bytes / secs);
    if (res->transport_seconds > 0) {
      best_transport = std::max(best_transport, bytes / res->transport_seconds);
    }
    lanes = res->lanes;
  }
  // One line for the script: MB/s as ucx_perftest counts them (2^20 bytes).
  std::printf(
      "peer_transfer lanes=%s block_bytes=%llu blocks=%d e2e_MBps=%.1f transport_MBps=%.1f\n",
      lanes.c_str(), static_cast<unsigned long long>(block_bytes), blocks, best_e2e / (1 << 20),
      best_transport / (1 << 20));
  return 0;
}
