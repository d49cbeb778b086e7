// bench/cluster_replay: the Mooncake trace (JSON lines with input_length and
// hash_ids, 512 tokens per block) served by three in-process kvtierd
// behind a round-robin router (request i goes to node i % 3), twice: each
// node alone, then the three as a cluster on a real etcd with the shared
// tier (Lookup misses filled from the chain's owner over UCX, Puts offered
// to it). Each request is an engine's: Lookup its block keys (the matched
// prefix is its hit), then Put the missing suffix as a chain.
//
// Reported per mode: the token-weighted prefix hit ratio and the prefill
// seconds the hits save (Llama-3.1-8B on one H100 at MFU 0.5, the
// recompute time of the hit tokens: costmodel::RecomputeSeconds), and for
// the cluster the blocks pulled and offered and the transport bandwidth of
// the pulls (bytes over the seconds the transport spent on them, as
// PeerTransfer measures every transfer). bench/cluster_replay_vs_ucx_perftest.sh
// runs it beside ucx_perftest with the same message size and transports.
//
// Blocks are 16 KiB stand-ins (1 layer, 1 KV head of 8 dims, bf16, 512
// tokens): the namespace has no cost model, so every pull is taken (the
// cost model's judgement is tested in cluster/ and server/, not here).
//
//   cluster_replay [--trace F] [--requests N] [--host-bytes B]
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cluster/testing/etcd_process.h"
#include "costmodel/catalog.h"
#include "costmodel/fetch_plan.h"
#include "kvtier/client.h"
#include "nlohmann/json.hpp"
#include "server/config.h"
#include "server/daemon.h"

namespace kvtier {
namespace {

constexpr uint64_t kTokensPerBlock = 512;
constexpr uint64_t kBlockBytes = 16 * 1024;
constexpr int kNodes = 3;

struct Request {
  uint64_t input_tokens = 0;
  std::vector<std::string> keys;
};

std::vector<Request> ReadTrace(const std::string& path, int limit) {
  std::vector<Request> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line) && (limit <= 0 || static_cast<int>(out.size()) < limit)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("hash_ids")) continue;
    Request r;
    r.input_tokens = j.value("input_length", 0);
    for (uint64_t id : j["hash_ids"]) r.keys.push_back(absl::StrCat("h", id));
    if (!r.keys.empty()) out.push_back(std::move(r));
  }
  return out;
}

struct Node {
  std::unique_ptr<Daemon> daemon;
  std::unique_ptr<client::Client> client;
  std::string ns;
};

struct Outcome {
  double hit_ratio = 0;
  double saved_seconds = 0;
  double replay_seconds = 0;
  int failures = 0;
};

absl::StatusOr<std::vector<Node>> StartNodes(const std::string& etcd, uint64_t host_bytes) {
  std::vector<Node> nodes(kNodes);
  for (Node& n : nodes) {
    DaemonConfig c = DefaultConfig(8ull << 30);
    c.listen = "127.0.0.1:0";
    c.metrics_listen = "off";
    c.host_tier_bytes = host_bytes;
    c.nvme_dirs = "";
    c.costmodel_probe_tiers = false;
    c.gpu_tier = "off";
    c.peer_transport = "ucx";
    c.cluster_etcd = etcd;
    c.cluster_name = "bench";
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(c);
    if (!d.ok()) return d.status();
    n.daemon = *std::move(d);
    absl::StatusOr<std::unique_ptr<client::Client>> client =
        client::Client::Connect(n.daemon->listen_address());
    if (!client.ok()) return client.status();
    n.client = *std::move(client);
    client::NamespaceOptions o;
    o.model_id = "cluster-replay";
    o.layout = client::KvLayoutSpec{
        .num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .tokens_per_block = kTokensPerBlock};
    absl::StatusOr<client::OpenedNamespace> opened = n.client->OpenNamespace(o);
    if (!opened.ok()) return opened.status();
    if (opened->block_bytes != kBlockBytes) {
      return absl::InternalError(absl::StrCat("block bytes ", opened->block_bytes));
    }
    n.ns = opened->id;
  }
  if (etcd.empty()) return nodes;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (Node& n : nodes) {
    while (n.daemon->membership()->Ring()->members().size() < kNodes) {
      if (absl::Now() > deadline) return absl::DeadlineExceededError("members did not meet");
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (n.daemon->cluster_tier() == nullptr) {
      return absl::FailedPreconditionError("no shared tier: is UCX available?");
    }
  }
  return nodes;
}

Outcome Replay(std::vector<Node>& nodes, const std::vector<Request>& trace,
               const costmodel::Deployment& d) {
  const std::string payload(kBlockBytes, 'k');
  uint64_t hit = 0, total = 0;
  Outcome out;
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < trace.size(); ++i) {
    const Request& r = trace[i];
    Node& n = nodes[i % kNodes];
    absl::StatusOr<client::LookupResult> found = n.client->Lookup(n.ns, r.keys);
    if (!found.ok()) {
      ++out.failures;
      continue;
    }
    const uint64_t hit_tokens =
        std::min<uint64_t>(found->matched * kTokensPerBlock, r.input_tokens);
    hit += hit_tokens;
    total += r.input_tokens;
    if (hit_tokens > 0) out.saved_seconds += costmodel::RecomputeSeconds(d, 0, hit_tokens);
    if (found->matched == r.keys.size()) continue;
    const std::vector<std::string> missing(r.keys.begin() + found->matched, r.keys.end());
    const std::vector<absl::string_view> data(missing.size(), payload);
    client::PutOptions put;
    put.parent_key = found->matched == 0 ? "" : r.keys[found->matched - 1];
    if (!n.client->PutBlocks(n.ns, missing, data, put).ok()) ++out.failures;
  }
  out.replay_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  out.hit_ratio = total == 0 ? 0 : static_cast<double>(hit) / static_cast<double>(total);
  return out;
}

int Run(int argc, char** argv) {
  std::string trace_path = "../shared/traces/synthetic_trace.jsonl";
  int requests = 0;
  uint64_t host_bytes = 64ull << 20;
  CLI::App app{"The Mooncake trace over three nodes, alone vs the cluster's shared tier"};
  app.add_option("--trace", trace_path, "Mooncake-format JSON lines")->capture_default_str();
  app.add_option("--requests", requests, "replay the first N requests (0: all)");
  app.add_option("--host-bytes", host_bytes, "host tier per node")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (EtcdProcess::Binary().empty()) {
    std::printf("SKIP: no etcd binary (scripts/install-deps installs etcd-server)\n");
    return 0;
  }
  // The transport on loopback unless the caller chose.
  setenv("UCX_NET_DEVICES", "lo", 0);
  setenv("UCX_TLS", "tcp", 0);
  const std::vector<Request> trace = ReadTrace(trace_path, requests);
  if (trace.empty()) {
    std::fprintf(stderr, "no requests in %s\n", trace_path.c_str());
    return 2;
  }
  costmodel::Deployment d;
  d.model = *costmodel::CatalogModel("llama-3.1-8b");
  d.gpu = *costmodel::CatalogGpu("h100-sxm");
  d.block_tokens = kTokensPerBlock;

  Outcome alone, cluster;
  {
    absl::StatusOr<std::vector<Node>> nodes = StartNodes("", host_bytes);
    if (!nodes.ok()) {
      std::fprintf(stderr, "alone: %s\n", nodes.status().ToString().c_str());
      return 1;
    }
    alone = Replay(*nodes, trace, d);
  }
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  if (!etcd.ok()) {
    std::fprintf(stderr, "etcd: %s\n", etcd.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::vector<Node>> nodes = StartNodes((*etcd)->endpoint(), host_bytes);
  if (!nodes.ok()) {
    std::fprintf(stderr, "cluster: %s\n", nodes.status().ToString().c_str());
    return 1;
  }
  cluster = Replay(*nodes, trace, d);
  ClusterTierStats sum;
  double pull_bytes = 0, pull_seconds = 0;
  for (Node& n : *nodes) {
    const ClusterTierStats s = n.daemon->cluster_tier()->Stats();
    sum.fills += s.fills;
    sum.pulled_blocks += s.pulled_blocks;
    sum.pulled_bytes += s.pulled_bytes;
    sum.pull_failures += s.pull_failures;
    sum.offers += s.offers;
    sum.offered_blocks += s.offered_blocks;
    sum.offer_failures += s.offer_failures;
    sum.offers_dropped += s.offers_dropped;
    for (const PeerStats& p : n.daemon->peer_transfer().Peers()) {
      // Both directions of every link: pulls (received) and offers (sent).
      pull_bytes += static_cast<double>(p.bytes_received);
      pull_seconds += p.transport_seconds * (p.bytes_sent + p.bytes_received == 0
                                                 ? 0
                                                 : static_cast<double>(p.bytes_received) /
                                                       (p.bytes_sent + p.bytes_received));
    }
  }
  std::printf("%zu requests, %d nodes round-robin, host tier %.0f MiB each, %llu-byte blocks\n",
              trace.size(), kNodes, static_cast<double>(host_bytes) / (1 << 20),
              static_cast<unsigned long long>(kBlockBytes));
  std::printf("%-8s %10s %18s %10s %9s\n", "mode", "hit_ratio", "prefill_s_saved", "replay_s",
              "failures");
  for (const auto& [name, o] : {std::pair<const char*, Outcome>{"alone", alone},
                                std::pair<const char*, Outcome>{"cluster", cluster}}) {
    std::printf("%-8s %10.4f %18.1f %10.1f %9d\n", name, o.hit_ratio, o.saved_seconds,
                o.replay_seconds, o.failures);
  }
  std::printf("cluster/alone hit ratio %.2fx, prefill seconds saved %.2fx\n",
              alone.hit_ratio > 0 ? cluster.hit_ratio / alone.hit_ratio : 0,
              alone.saved_seconds > 0 ? cluster.saved_seconds / alone.saved_seconds : 0);
  std::printf(
      "shared tier: %llu fills, %llu blocks pulled (%llu failures); %llu offers, %llu "
      "blocks taken (%llu failures, %llu dropped)\n",
      static_cast<unsigned long long>(sum.fills),
      static_cast<unsigned long long>(sum.pulled_blocks),
      static_cast<unsigned long long>(sum.pull_failures),
      static_cast<unsigned long long>(sum.offers),
      static_cast<unsigned long long>(sum.offered_blocks),
      static_cast<unsigned long long>(sum.offer_failures),
      static_cast<unsigned long long>(sum.offers_dropped));
  std::printf("pull_transport_MBps=%.1f pulled_MB=%.1f\n",
              pull_seconds > 0 ? pull_bytes / pull_seconds / 1e6 : 0, pull_bytes / 1e6);
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) { return kvtier::Run(argc, argv); }
