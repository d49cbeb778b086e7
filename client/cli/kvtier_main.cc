// kvtier: the operator's command line for kvtierd.
//   kvtier [--addr A] [--json] [--tls-ca F [--tls-cert F --tls-key F]] [--token-file F]
//   kvtier status | tiers | namespaces | wear | peers | health
//   kvtier blocks --namespace ID [--top N]
//   kvtier evict --namespace ID | --all
//   kvtier watch [--interval S] [--count N]
//   kvtier put FILE [--block-bytes 256KiB]      prints the block keys (hex)
//   kvtier get KEY... -o FILE [--block-bytes N | --namespace ID]
//   kvtier peers
//   kvtier transfer --peer ADDR [--push | --pull] KEY... [--block-bytes N | --namespace ID]
//   kvtier plan kv|budget|fetch|tiers|pd|preempt|mla|quant|fp8|sharing|strand|state
//     [--model NAME | --model-config FILE] [--gpu NAME] [--tp N] ...  (docs/planner.md)
// Exit status: 0 success, 1 the daemon returned an error or is unreachable,
// 2 bad usage or a local file error.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/cli/daemon_connection.h"
#include "client/cli/file_blocks.h"
#include "client/cli/operator_views.h"
#include "client/cli/replay.h"
#include "client/planner/plan_command.h"
#include "google/protobuf/util/json_util.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace kvtier {
namespace {

bool Unhex(const std::string& hex, std::string* out) {
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() > 64) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

// --- status / tiers / namespaces ------------------------------------------

int Status(const Globals& g) {
  v1::GetStatusResponse r;
  bool printed = false;
  if (int rc = CallAdmin(g, "GetStatus", &v1::Admin::Stub::GetStatus, &r, &printed);
      rc != 0 || printed) {
    return rc;
  }
  std::cout << "kvtierd " << r.build().version() << " at " << r.listen_address() << ", up "
            << r.uptime_seconds() << " s\n"
            << "  build:      cuda=" << r.build().with_cuda() << " ucx=" << r.build().with_ucx()
            << " uring=" << r.build().with_uring() << "\n"
            << "  gpu:        " << r.gpu().detail() << "\n"
            << "  copies:     " << r.gpu().copy_engine() << " engine ("
            << r.gpu().copy_engine_detail() << ")\n"
            << "  gpu tier:   "
            << (r.gpu().tier_capacity_bytes() == 0
                    ? "off (" + r.gpu().tier_note() + ")"
                    : absl::StrCat(HumanBytes(r.gpu().tier_resident_bytes()), " of ",
                                   HumanBytes(r.gpu().tier_capacity_bytes()), ", ",
                                   r.gpu().tier_resident_blocks(), " blocks, ", r.gpu().tier_hits(),
                                   " hits, ", r.gpu().tier_promotions(), " promotions"))
            << "\n"
            << "  transfer:   "
            << (r.transfer().available()
                    ? absl::StrCat(r.transfer().transport(), " (transports ",
                                   r.transfer().transports(), "), role ", r.transfer().role(),
                                   ", net devices ", r.transfer().net_devices())
                    : "unavailable (" + r.transfer().detail() + ")")
            << "\n"
            << "  namespaces: " << r.namespaces() << "\n"
            << "  blocks:     " << r.blocks() << " (" << HumanBytes(r.bytes()) << ")\n"
            << "  leases:     " << r.active_leases() << " active\n"
            << "  stranded:   " << r.stranded_blocks() << "\n"
            << "  lookups:    " << r.counters().lookup_hits() << " of "
            << r.counters().lookup_keys() << " keys hit\n"
            << "  evictions:  " << r.counters().evictions()
            << ", checksum mismatches: " << r.counters().checksum_mismatches() << "\n";
  if (r.nvme().enabled()) {
    const v1::Counters& c = r.counters();
    std::cout << "  nvme:       " << r.nvme().write_policy() << " via " << r.nvme().io_engine()
              << (r.nvme().degraded() ? ", DEGRADED: " + r.nvme().last_error() : "") << "\n"
              << "              " << c.demotions() << " demoted ("
              << HumanBytes(c.bytes_host_to_nvme()) << "), " << c.promotions() << " promoted ("
              << HumanBytes(c.bytes_nvme_to_host()) << "), " << c.recovered_blocks()
              << " recovered at start\n";
  } else {
    std::cout << "  nvme:       off\n";
  }
  const v1::PlannerStatus& p = r.planner();
  std::cout << "  planner:    "
            << (p.enabled() ? "on, " + p.gpu() + " at MFU " + std::to_string(p.mfu()).substr(0, 4)
                            : std::string("off"))
            << " (" << p.note() << ")\n";
  for (const v1::TierEstimate& t : p.tiers()) {
    std::string kind = v1::TierKind_Name(t.tier()).substr(std::string("TIER_KIND_").size());
    char line[160];
    std::snprintf(line, sizeof(line),
                  "              %s: %.2f GB/s, %.1f us latency (%s, %llu samples)\n", kind.c_str(),
                  t.bytes_per_s() / 1e9, t.latency_s() * 1e6, t.source().c_str(),
                  static_cast<unsigned long long>(t.samples()));
    std::cout << line;
  }
  if (r.counters().admissions_refused_value() > 0) {
    std::cout << "              " << r.counters().admissions_refused_value()
              << " NVMe admissions refused by tier value\n";
  }
  return 0;
}

// grpc.health.v1.Health/Check with the empty service name, by hand: the
// request is the empty message, and the answer's field 1 (varint) is the
// serving status (1 = SERVING). Needs no credentials.
int Health(const Globals& g) {
  std::shared_ptr<grpc::Channel> channel = Connect(g);
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  SetDeadline(g, &ctx);
  grpc::CompletionQueue cq;
  grpc::Slice empty("", 0);
  grpc::ByteBuffer request(&empty, 1);
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "health check did not complete");
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return RpcFailed(g, "Health/Check", status);
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& sl : slices) {
    bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  }
  const int serving = bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
  const char* const kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  const char* name = serving >= 0 && serving <= 3 ? kNames[serving] : "UNKNOWN";
  if (g.json) {
    std::cout << "{\"status\": \"" << name << "\"}\n";
  } else {
    std::cout << g.addr << ": " << name << "\n";
  }
  return serving == 1 ? 0 : 1;
}

int Peers(const Globals& g) {
  v1::ListPeersResponse r;
  bool printed = false;
  if (int rc = CallAdmin(g, "ListPeers", &v1::Admin::Stub::ListPeers, &r, &printed);
      rc != 0 || printed) {
    return rc;
  }
  if (r.peers().empty()) std::cout << "no peers yet (peers appear after the first Transfer)\n";
  for (const v1::PeerStatus& p : r.peers()) {
    std::cout << p.address() << "  " << (p.role().empty() ? "?" : p.role()) << "  "
              << (p.connected() ? "connected" : "not connected") << " via "
              << (p.lanes().empty() ? "-" : p.lanes()) << "\n"
              << "  sent " << HumanBytes(p.bytes_sent()) << " (" << p.blocks_sent()
              << " blocks), received " << HumanBytes(p.bytes_received()) << " ("
              << p.blocks_received() << " blocks), " << p.transfers() << " transfers, "
              << p.failed_transfers() << " with failures, " << p.connects() << " connects\n"
              << "  observed bandwidth "
              << HumanBytes(static_cast<uint64_t>(p.observed_bytes_per_second())) << "/s\n";
    if (!p.last_error().empty()) std::cout << "  last error: " << p.last_error() << "\n";
  }
  return 0;
}

int Namespaces(const Globals& g) {
  v1::ListNamespacesResponse r;
  bool printed = false;
  if (int rc = CallAdmin(g, "ListNamespaces", &v1::Admin::Stub::ListNamespaces, &r, &printed);
      rc != 0 || printed) {
    return rc;
  }
  if (r.namespaces().empty()) std::cout << "no namespaces open\n";
  for (const v1::NamespaceStatus& n : r.namespaces()) {
    const v1::NamespaceLayout& l = n.layout();
    std::cout << n.namespace_id() << "  " << n.model_id() << "  layers=" << l.num_layers()
              << " kv_heads=" << l.num_kv_heads() << " head_dim=" << l.head_dim()
              << " tokens/block=" << l.tokens_per_block() << " tp=" << l.tp_rank() << "/"
              << l.tp_size() << (n.salted() ? " salted" : "")
              << (n.tenant().empty() ? "" : " tenant=" + n.tenant()) << "  " << n.blocks()
              << " blocks, " << HumanBytes(n.bytes())
              << (n.cost_model().empty() ? "" : "  model=" + n.cost_model())
              << (n.nvme_admitted()
                      ? ""
                      : "  nvme=not admitted (tier value " +
                            std::to_string(n.nvme_value_seconds_per_token() * 1e9).substr(0, 8) +
                            " ns/token)")
              << (n.encoding().empty()
                      ? ""
                      : absl::StrCat("  stored as ", n.encoding(), ", ", n.fp8_clipped(), " of ",
                                     n.fp8_values(), " values clipped"))
              << "\n";
  }
  return 0;
}

int Wear(const Globals& g) {
  v1::GetWearResponse r;
  bool printed = false;
  if (int rc = CallAdmin(g, "GetWear", &v1::Admin::Stub::GetWear, &r, &printed);
      rc != 0 || printed) {
    return rc;
  }
  if (!r.nvme_enabled()) {
    std::cout << "nvme tier: off\n";
    return 0;
  }
  std::cout << "admission to nvme: " << (r.admitting() ? "open" : "CLOSED: " + r.reason()) << " ("
            << r.admissions_refused_budget() << " refused for budget)\n";
  for (const v1::DeviceWear& d : r.devices()) {
    char days[64];
    if (d.days_to_wear_out() < 0) {
      std::snprintf(days, sizeof(days), "no recent writes");
    } else {
      std::snprintf(days, sizeof(days), "%.0f days to wear-out at this rate", d.days_to_wear_out());
    }
    std::cout << d.dir() << ": " << HumanBytes(d.capacity_bytes()) << " at " << d.dwpd()
              << " DWPD x " << d.warranty_years() << " years, safety " << d.safety() << "\n"
              << "  budget " << HumanBytes(static_cast<uint64_t>(d.budget_bytes_per_day()))
              << "/day, " << HumanBytes(static_cast<uint64_t>(d.available_bytes()))
              << " available now" << (d.over_budget() ? " (OVER BUDGET)" : "") << "\n"
              << "  written " << HumanBytes(d.bytes_written()) << ", recent rate "
              << HumanBytes(static_cast<uint64_t>(d.write_rate_bytes_per_s())) << "/s, " << days
              << " (TBW " << HumanBytes(static_cast<uint64_t>(d.tbw_bytes())) << ")\n"
              << "  SMART: "
              << (d.smart_available()
                      ? HumanBytes(d.smart_data_units_written_bytes()) + " written, " +
                            std::to_string(d.smart_percentage_used()) + "% used (" +
                            d.smart_detail() + ")"
                      : "unavailable: " + d.smart_detail())
              << "\n";
  }
  return 0;
}

// --- put / get --------------------------------------------------------------

struct FileNamespace {
  std::string model = "kvtier-cli";
  uint64_t block_bytes = uint64_t{256} << 10;
  std::string namespace_id;  // overrides model/block_bytes for get
};

// Opens (idempotently) the namespace `kvtier put` uses for this block size.
int OpenFileNamespace(const Globals& g, v1::KvCache::Stub* stub, const FileNamespace& f,
                      std::string* id, uint64_t* block_bytes) {
  if (f.block_bytes == 0 || f.block_bytes % kFileBlockGranule != 0) {
    return LocalError("--block-bytes must be a positive multiple of 512");
  }
  v1::OpenNamespaceRequest req;
  req.set_model_id(f.model);
  v1::NamespaceLayout* l = req.mutable_layout();
  l->set_num_layers(1);
  l->set_num_kv_heads(1);
  l->set_head_dim(128);
  l->set_dtype(v1::DTYPE_BF16);
  l->set_tokens_per_block(static_cast<uint32_t>(f.block_bytes / kFileBlockGranule));
  l->set_tp_size(1);
  grpc::ClientContext ctx;
  SetDeadline(g, &ctx);
  v1::OpenNamespaceResponse r;
  grpc::Status s = stub->OpenNamespace(&ctx, req, &r);
  if (!s.ok()) return RpcFailed(g, "OpenNamespace", s);
  *id = r.namespace_id();
  *block_bytes = r.block_bytes();
  return 0;
}

int Put(const Globals& g, const std::string& path, const FileNamespace& f, uint64_t chunk_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return LocalError("cannot read '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string contents = buf.str();
  if (contents.empty()) return LocalError("'" + path + "' is empty; nothing to put");
  // The daemon's default message limit is 16 MiB; leave room for headers.
  if (chunk_bytes == 0 || chunk_bytes > (uint64_t{8} << 20)) {
    return LocalError("--chunk-bytes must be in 1..8MiB");
  }

  auto stub = v1::KvCache::NewStub(Connect(g));
  std::string ns;
  uint64_t block_bytes = 0;
  if (int rc = OpenFileNamespace(g, stub.get(), f, &ns, &block_bytes); rc != 0) return rc;
  const std::vector<FileBlock> blocks = SplitIntoBlocks(contents, block_bytes);

  grpc::ClientContext ctx;
  SetDeadline(g, &ctx);
  v1::PutResponse resp;
  std::unique_ptr<grpc::ClientWriter<v1::PutChunk>> writer = stub->Put(&ctx, &resp);
  for (const FileBlock& b : blocks) {
    for (uint64_t off = 0; off < b.size; off += chunk_bytes) {
      v1::PutChunk chunk;
      if (off == 0) {
        chunk.set_namespace_id(ns);
        chunk.set_key(b.key);
        chunk.set_parent_key(b.parent_key);
        chunk.set_block_bytes(b.size);
      }
      chunk.set_data(contents.data() + b.offset + off, std::min(chunk_bytes, b.size - off));
      if (!writer->Write(chunk)) break;  // the server ended the call; Finish says why
    }
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return RpcFailed(g, "Put", s);

  if (g.json) {
    nlohmann::json j;
    j["namespace_id"] = ns;
    j["block_bytes"] = block_bytes;
    j["blocks"] = blocks.size();
    j["bytes"] = contents.size();
    j["blocks_stored"] = resp.blocks_stored();
    j["blocks_already_cached"] = resp.blocks_already_cached();
    j["keys"] = nlohmann::json::array();
    for (const FileBlock& b : blocks) j["keys"].push_back(absl::BytesToHexString(b.key));
    std::cout << j.dump(2) << "\n";
  } else {
    for (const FileBlock& b : blocks) std::cout << absl::BytesToHexString(b.key) << "\n";
    std::fprintf(stderr, "kvtier: put %zu blocks (%s; %u new, %u already cached) in namespace %s\n",
                 blocks.size(), HumanBytes(contents.size()).c_str(), resp.blocks_stored(),
                 resp.blocks_already_cached(), ns.c_str());
  }
  return 0;
}

// `kvtier transfer --peer ADDR (--push | --pull) KEY...`: moves blocks of a
// `kvtier put` namespace between the daemon at --addr and a peer daemon.
int Transfer(const Globals& g, const std::vector<std::string>& hex_keys, const std::string& peer,
             bool pull, const FileNamespace& f) {
  v1::TransferRequest req;
  for (const std::string& h : hex_keys) {
    std::string key;
    if (!Unhex(h, &key)) return LocalError("'" + h + "' is not a hex key of 1..32 bytes");
    req.add_keys(key);
  }
  req.set_peer(peer);
  req.set_direction(pull ? v1::TRANSFER_DIRECTION_PULL : v1::TRANSFER_DIRECTION_PUSH);
  auto stub = v1::KvCache::NewStub(Connect(g));
  if (!f.namespace_id.empty()) {
    req.set_namespace_id(f.namespace_id);
  } else {
    uint64_t block_bytes = 0;
    if (int rc = OpenFileNamespace(g, stub.get(), f, req.mutable_namespace_id(), &block_bytes);
        rc != 0) {
      return rc;
    }
  }
  grpc::ClientContext ctx;
  SetDeadline(g, &ctx);
  v1::TransferResponse resp;
  if (grpc::Status s = stub->Transfer(&ctx, req, &resp); !s.ok())
    return RpcFailed(g, "Transfer", s);
  if (g.json) {
    PrintJson(resp);
  } else {
    for (const v1::BlockCompletion& c : resp.blocks()) {
      std::cout << absl::BytesToHexString(c.key()) << "  "
                << (c.code() == 0
                        ? "ok"
                        : absl::StatusCodeToString(static_cast<absl::StatusCode>(c.code())))
                << (c.message().empty() ? "" : "  " + c.message()) << "\n";
    }
    std::cout << HumanBytes(resp.bytes_moved()) << " moved over " << resp.lanes() << " in "
              << resp.transport_seconds() << " s\n";
  }
  for (const v1::BlockCompletion& c : resp.blocks()) {
    if (c.code() != 0) return 1;
  }
  return 0;
}

int Get(const Globals& g, const std::vector<std::string>& hex_keys, const std::string& out_path,
        const FileNamespace& f) {
  v1::GetRequest req;
  for (const std::string& h : hex_keys) {
    std::string key;
    if (!Unhex(h, &key)) return LocalError("'" + h + "' is not a hex key of 1..32 bytes");
    req.add_keys(key);
  }
  auto stub = v1::KvCache::NewStub(Connect(g));
  if (!f.namespace_id.empty()) {
    req.set_namespace_id(f.namespace_id);
  } else {
    uint64_t block_bytes = 0;
    if (int rc = OpenFileNamespace(g, stub.get(), f, req.mutable_namespace_id(), &block_bytes);
        rc != 0) {
      return rc;
    }
  }
  // Write to a temporary file and rename on success: a failed get leaves no
  // partial output behind.
  const std::string tmp = out_path + ".kvtier-partial";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return LocalError("cannot write '" + tmp + "'");
  grpc::ClientContext ctx;
  SetDeadline(g, &ctx);
  std::unique_ptr<grpc::ClientReader<v1::GetChunk>> reader = stub->Get(&ctx, req);
  v1::GetChunk chunk;
  uint64_t total = 0, blocks = 0, expect_offset = 0, block_size = 0;
  std::string protocol_error;
  while (reader->Read(&chunk)) {
    if (!chunk.key().empty()) {
      if (expect_offset != block_size) protocol_error = "a block ended early";
      if (blocks >= static_cast<uint64_t>(req.keys_size()) || chunk.key() != req.keys(blocks)) {
        protocol_error = "blocks arrived out of order";
      }
      ++blocks;
      block_size = chunk.block_bytes();
      expect_offset = 0;
    }
    if (chunk.offset() != expect_offset) protocol_error = "chunk offsets are not contiguous";
    if (!protocol_error.empty()) {
      ctx.TryCancel();
      break;
    }
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    expect_offset += chunk.data().size();
    total += chunk.data().size();
  }
  grpc::Status s = reader->Finish();
  out.close();
  if (protocol_error.empty() && s.ok() &&
      (blocks != static_cast<uint64_t>(req.keys_size()) || expect_offset != block_size)) {
    protocol_error = "the stream ended before every block arrived";
  }
  if (!protocol_error.empty() || !s.ok() || !out) {
    std::remove(tmp.c_str());
    if (!protocol_error.empty()) return LocalError("Get: " + protocol_error);
    if (!s.ok()) return RpcFailed(g, "Get", s);
    return LocalError("cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return LocalError("cannot rename '" + tmp + "' to '" + out_path + "'");
  }
  if (g.json) {
    nlohmann::json j;
    j["blocks"] = blocks;
    j["bytes"] = total;
    j["output"] = out_path;
    std::cout << j.dump(2) << "\n";
  } else {
    std::fprintf(stderr, "kvtier: wrote %llu blocks (%s) to %s\n",
                 static_cast<unsigned long long>(blocks), HumanBytes(total).c_str(),
                 out_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace kvtier

namespace kvtier {
namespace {

int Run(int argc, char** argv) {
  CLI::App app{"kvtier: inspect and exercise a kvtierd daemon"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the subcommand: `kvtier status --json`
  Globals g;
  AddGlobalFlags(app, &g);

  auto* status = app.add_subcommand("status", "daemon status and counters");
  auto* tiers = app.add_subcommand("tiers", "capacity and use of each tier");
  auto* namespaces = app.add_subcommand("namespaces", "open namespaces");
  auto* wear = app.add_subcommand("wear", "SSD write budget, wear-out projection and SMART");
  auto* peers = app.add_subcommand("peers", "peer daemons: transport, bytes moved, bandwidth");
  auto* health =
      app.add_subcommand("health", "gRPC health check (exit 0 when serving); needs no credentials");
  std::string blocks_ns;
  uint32_t blocks_top = 20;
  auto* blocks = app.add_subcommand("blocks", "the most used blocks of a namespace");
  blocks->add_option("--namespace", blocks_ns, "namespace id (see `kvtier namespaces`)")
      ->required();
  blocks->add_option("--top", blocks_top, "how many blocks (1..10000)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  std::string evict_ns;
  bool evict_all = false, evict_progress = true;
  auto* evict = app.add_subcommand(
      "evict", "drop a namespace's unpinned blocks from every tier (progress on stderr)");
  evict->add_option("--namespace", evict_ns, "namespace id");
  evict->add_flag("--all", evict_all, "every namespace");
  evict->add_flag("!--no-progress", evict_progress, "no progress bar");
  double watch_interval = 2;
  int watch_count = 0;
  auto* watch = app.add_subcommand("watch", "a summary and the tier table, refreshed");
  watch->add_option("--interval", watch_interval, "seconds between refreshes")
      ->capture_default_str();
  watch->add_option("--count", watch_count, "stop after N refreshes (0: never)")
      ->capture_default_str();

  FileNamespace fns;
  uint64_t chunk_bytes = 1 << 20;
  std::string put_path;
  auto* put = app.add_subcommand("put", "store a file as a chain of blocks; prints their keys");
  put->add_option("FILE", put_path, "file to store")->required();
  put->add_option("--block-bytes", fns.block_bytes, "block size (multiple of 512)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  put->add_option("--chunk-bytes", chunk_bytes, "bytes per Put message")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  put->add_option("--model", fns.model, "model id of the namespace")->capture_default_str();

  std::vector<std::string> get_keys;
  std::string out_path;
  auto* get = app.add_subcommand("get", "fetch blocks by key (hex) into a file");
  get->add_option("KEY", get_keys, "block keys in hex, in order")->required();
  get->add_option("-o,--output", out_path, "output file")->required();
  get->add_option("--block-bytes", fns.block_bytes, "block size used by put")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  get->add_option("--model", fns.model, "model id used by put")->capture_default_str();
  get->add_option("--namespace", fns.namespace_id,
                  "namespace id (instead of --block-bytes/--model)");

  std::vector<std::string> transfer_keys;
  std::string transfer_peer;
  bool transfer_pull = false;
  auto* transfer = app.add_subcommand(
      "transfer", "move blocks of a `put` namespace between this daemon and a peer daemon");
  transfer->add_option("KEY", transfer_keys, "block keys in hex, in order")->required();
  transfer->add_option("--peer", transfer_peer, "the other daemon, host:port")->required();
  bool transfer_push = false;
  auto* push_flag =
      transfer->add_flag("--push", transfer_push, "send from --addr to --peer (the default)");
  transfer->add_flag("--pull", transfer_pull, "fetch from --peer into --addr")->excludes(push_flag);
  transfer->add_option("--block-bytes", fns.block_bytes, "block size used by put")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  transfer->add_option("--model", fns.model, "model id used by put")->capture_default_str();
  transfer->add_option("--namespace", fns.namespace_id,
                       "namespace id (instead of --block-bytes/--model)");

  ReplayOptions replay_options;
  auto* replay =
      app.add_subcommand("replay", "drive the daemon like an engine from a Mooncake trace");
  replay
      ->add_option("TRACE", replay_options.trace, "JSONL trace (timestamp, input_length, hash_ids)")
      ->required();
  replay->add_option("--model", replay_options.model, "catalog model: layout and plans")
      ->capture_default_str();
  replay->add_option("--gpu", replay_options.gpu, "catalog GPU for the prefill estimate")
      ->capture_default_str();
  replay->add_option("--block-bytes", replay_options.block_bytes, "bytes stored per trace block")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  replay
      ->add_option("--speed", replay_options.speed,
                   "0: as fast as possible; N: honour timestamps compressed N times")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  replay->add_option("--limit", replay_options.limit, "replay only the first N requests");
  replay->add_flag("!--no-progress", replay_options.progress, "no progress bar");

  std::unique_ptr<planner::PlanCommand> plan = planner::AddPlanCommand(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and succeeds; every other parse error is bad usage.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (int rc = ResolveGlobals(&g); rc != 0) return rc;
  // Bad TLS files are a usage error, reported once, before any command.
  if (!plan->parsed() && Connect(g) == nullptr) return 2;
  if (plan->parsed()) {
    if (plan->wants_measured_links()) {
      // The links this daemon measured to its peers, judged beside the
      // catalog's (what the operator has against what the model needs).
      v1::ListPeersResponse r;
      bool printed = false;
      Globals quiet = g;
      quiet.json = false;
      if (int rc = CallAdmin(quiet, "ListPeers", &v1::Admin::Stub::ListPeers, &r, &printed);
          rc != 0) {
        return rc;
      }
      if (r.peers().empty()) {
        std::fprintf(stderr, "kvtier: the daemon at %s has no peers yet; run a transfer first\n",
                     g.addr.c_str());
        return 1;
      }
      for (const v1::PeerStatus& p : r.peers()) {
        if (p.observed_bytes_per_second() <= 0) continue;
        plan->AddMeasuredLink({absl::StrCat("peer ", p.address(), " (measured, ", p.lanes(), ")"),
                               p.observed_bytes_per_second(), 0, "measured by kvtierd"});
      }
    }
    return plan->Run(g.json);
  }
  if (replay->parsed()) {
    replay_options.address = g.addr;
    replay_options.credentials = g.credentials;
    replay_options.json = g.json;
    return RunReplay(replay_options);
  }
  if (status->parsed()) return Status(g);
  if (health->parsed()) return Health(g);
  if (blocks->parsed()) return Blocks(g, blocks_ns, blocks_top);
  if (evict->parsed()) return Evict(g, evict_ns, evict_all, evict_progress);
  if (watch->parsed()) return Watch(g, watch_interval, watch_count);
  if (tiers->parsed()) return Tiers(g);
  if (namespaces->parsed()) return Namespaces(g);
  if (wear->parsed()) return Wear(g);
  if (peers->parsed()) return Peers(g);
  if (put->parsed()) return Put(g, put_path, fns, chunk_bytes);
  if (get->parsed()) return Get(g, get_keys, out_path, fns);
  if (transfer->parsed()) return Transfer(g, transfer_keys, transfer_peer, transfer_pull, fns);
  return 2;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  try {
    return kvtier::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtier: fatal: %s\n", e.what());
    return 1;
  }
}
