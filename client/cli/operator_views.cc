#include "client/cli/operator_views.h"

#include <grpcpp/generic/generic_stub.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace kvtier {
namespace {

std::string TierName(v1::TierKind kind) {
  std::string name = v1::TierKind_Name(kind);
  return absl::AsciiStrToLower(name.substr(std::string("TIER_KIND_").size()));
}

double Ratio(double part, double whole) { return whole > 0 ? part / whole : 0; }

struct TierRow {
  std::string tier;
  v1::TierKind kind = v1::TIER_KIND_UNSPECIFIED;
  uint64_t capacity = 0, used = 0, blocks = 0, evictions = 0;
  uint64_t hits = 0;       // block reads served by this tier
  double hit_ratio = 0;    // hits over all block reads
  double bytes_per_s = 0;  // measured read bandwidth (0 = unknown)
};

// One table from GetStatus (hits, planner bandwidth, GPU tier) and ListTiers.
int ReadTiers(const Globals& g, std::vector<TierRow>* rows, v1::GetStatusResponse* status) {
  Globals quiet = g;
  quiet.json = false;
  bool printed = false;
  if (int rc = CallAdmin(quiet, "GetStatus", &v1::Admin::Stub::GetStatus, status, &printed);
      rc != 0) {
    return rc;
  }
  v1::ListTiersResponse tiers;
  if (int rc = CallAdmin(quiet, "ListTiers", &v1::Admin::Stub::ListTiers, &tiers, &printed);
      rc != 0) {
    return rc;
  }
  const v1::Counters& c = status->counters();
  const v1::GpuInfo& gpu = status->gpu();
  const double reads = static_cast<double>(c.host_hits() + c.nvme_hits() + gpu.tier_hits());
  if (gpu.tier_capacity_bytes() > 0) {
    rows->push_back({"gpu", v1::TIER_KIND_GPU, gpu.tier_capacity_bytes(), gpu.tier_resident_bytes(),
                     gpu.tier_resident_blocks(), gpu.tier_evictions(), gpu.tier_hits(),
                     Ratio(static_cast<double>(gpu.tier_hits()), reads), 0});
  }
  for (const v1::TierStatus& t : tiers.tiers()) {
    TierRow row{TierName(t.kind()),
                t.kind(),
                t.capacity_bytes(),
                t.used_bytes(),
                t.blocks(),
                t.evictions(),
                0,
                0,
                0};
    row.hits = t.kind() == v1::TIER_KIND_HOST   ? c.host_hits()
               : t.kind() == v1::TIER_KIND_NVME ? c.nvme_hits()
                                                : 0;
    row.hit_ratio = Ratio(static_cast<double>(row.hits), reads);
    for (const v1::TierEstimate& e : status->planner().tiers()) {
      if (e.tier() == t.kind()) row.bytes_per_s = e.bytes_per_s();
    }
    rows->push_back(row);
  }
  return 0;
}

void PrintTierTable(const std::vector<TierRow>& rows, const v1::GetStatusResponse& status) {
  std::printf("%-5s %11s %11s %6s %9s %9s %7s %13s\n", "TIER", "CAPACITY", "USED", "USE%", "BLOCKS",
              "EVICTED", "HITS%", "READ BW");
  for (const TierRow& r : rows) {
    std::printf("%-5s %11s %11s %5.1f%% %9llu %9llu %6.1f%% %13s\n", r.tier.c_str(),
                HumanBytes(r.capacity).c_str(), HumanBytes(r.used).c_str(),
                100 * Ratio(static_cast<double>(r.used), static_cast<double>(r.capacity)),
                static_cast<unsigned long long>(r.blocks),
                static_cast<unsigned long long>(r.evictions), 100 * r.hit_ratio,
                r.bytes_per_s > 0
                    ? (HumanBytes(static_cast<uint64_t>(r.bytes_per_s)) + "/s").c_str()
                    : "-");
  }
  const v1::Counters& c = status.counters();
  std::printf(
      "lookups: %llu keys, %.1f%% found cached; HITS%% = share of block reads served "
      "by the tier\n",
      static_cast<unsigned long long>(c.lookup_keys()),
      100 * Ratio(static_cast<double>(c.lookup_hits()), static_cast<double>(c.lookup_keys())));
}

nlohmann::json TierJson(const std::vector<TierRow>& rows, const v1::GetStatusResponse& status) {
  nlohmann::json out;
  out["tiers"] = nlohmann::json::array();
  for (const TierRow& r : rows) {
    out["tiers"].push_back({{"tier", r.tier},
                            {"kind", v1::TierKind_Name(r.kind)},
                            {"capacity_bytes", r.capacity},
                            {"used_bytes", r.used},
                            {"blocks", r.blocks},
                            {"evictions", r.evictions},
                            {"hits", r.hits},
                            {"hit_ratio", r.hit_ratio},
                            {"read_bytes_per_s", r.bytes_per_s}});
  }
  const v1::Counters& c = status.counters();
  out["lookup_keys"] = c.lookup_keys();
  out["lookup_hits"] = c.lookup_hits();
  return out;
}

}  // namespace

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
            << "  evictions:  " << r.counters().evictions() << " (policy " << r.eviction().policy()
            << ", reuse history " << HumanBytes(r.eviction().history_bytes())
            << "), checksum mismatches: " << r.counters().checksum_mismatches() << "\n";
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
              << l.tp_size() << (l.latent() ? " latent" : "") << (n.salted() ? " salted" : "")
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
    for (int i = 0; i < n.groups_size(); ++i) {
      const v1::GroupStatus& gs = n.groups(i);
      const v1::LayerGroup& spec = l.groups(i);
      std::cout << "  group " << i << " "
                << absl::StripPrefix(v1::LayerGroup::Kind_Name(gs.kind()), "LAYER_GROUP_")
                << " layers=" << spec.layers_size()
                << (spec.window_tokens() ? absl::StrCat(" window=", spec.window_tokens()) : "")
                << (spec.state_bytes() ? absl::StrCat(" checkpoint=", spec.checkpoint_tokens())
                                       : "")
                << "  " << gs.blocks() << (spec.state_bytes() ? " snapshots, " : " blocks, ")
                << HumanBytes(gs.bytes()) << " (" << gs.nvme_blocks() << " on nvme), "
                << gs.evictions() << " evicted, stranded " << HumanBytes(gs.stranded_bytes())
                << "\n";
    }
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

int Tiers(const Globals& g) {
  std::vector<TierRow> rows;
  v1::GetStatusResponse status;
  if (int rc = ReadTiers(g, &rows, &status); rc != 0) return rc;
  // The layer groups of hybrid namespaces, per tier: best effort (the tier
  // rows stand without them), from ListNamespaces, which scans the groups'
  // blocks.
  Globals quiet = g;
  quiet.json = false;
  bool printed = false;
  v1::ListNamespacesResponse list;
  const bool have_groups =
      CallAdmin(quiet, "ListNamespaces", &v1::Admin::Stub::ListNamespaces, &list, &printed) == 0;
  nlohmann::json groups = nlohmann::json::array();
  for (const v1::NamespaceStatus& n : list.namespaces()) {
    for (int i = 0; i < n.groups_size(); ++i) {
      const v1::GroupStatus& gs = n.groups(i);
      groups.push_back({{"namespace_id", n.namespace_id()},
                        {"model_id", n.model_id()},
                        {"group", i},
                        {"kind", v1::LayerGroup::Kind_Name(gs.kind())},
                        {"blocks", gs.blocks()},
                        {"bytes", gs.bytes()},
                        {"host_blocks", gs.host_blocks()},
                        {"nvme_blocks", gs.nvme_blocks()},
                        {"evictions", gs.evictions()},
                        {"stranded_bytes", gs.stranded_bytes()}});
    }
  }
  if (g.json) {
    nlohmann::json out = TierJson(rows, status);
    if (have_groups) out["groups"] = groups;
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  PrintTierTable(rows, status);
  if (!have_groups) std::printf("(layer groups unavailable: ListNamespaces failed)\n");
  if (groups.empty()) return 0;
  std::printf("\nlayer groups of hybrid namespaces (a block may be in both tiers):\n");
  std::printf("%-16s %-24s %-3s %-15s %9s %9s %11s %9s %9s\n", "NAMESPACE", "MODEL", "G", "KIND",
              "HOST", "NVME", "BYTES", "EVICTED", "STRANDED");
  for (const nlohmann::json& r : groups) {
    const std::string kind(absl::StripPrefix(r["kind"].get<std::string>(), "LAYER_GROUP_"));
    std::printf("%-16s %-24s %-3d %-15s %9llu %9llu %11s %9llu %9s\n",
                r["namespace_id"].get<std::string>().substr(0, 16).c_str(),
                r["model_id"].get<std::string>().substr(0, 24).c_str(), r["group"].get<int>(),
                kind.c_str(), static_cast<unsigned long long>(r["host_blocks"].get<uint64_t>()),
                static_cast<unsigned long long>(r["nvme_blocks"].get<uint64_t>()),
                HumanBytes(r["bytes"].get<uint64_t>()).c_str(),
                static_cast<unsigned long long>(r["evictions"].get<uint64_t>()),
                HumanBytes(r["stranded_bytes"].get<uint64_t>()).c_str());
  }
  return 0;
}

int Blocks(const Globals& g, const std::string& namespace_id, uint32_t top) {
  auto stub = v1::Admin::NewStub(Connect(g));
  grpc::ClientContext ctx;
  SetDeadline(g, &ctx);
  v1::ListBlocksRequest req;
  req.set_namespace_id(namespace_id);
  req.set_top(top);
  v1::ListBlocksResponse r;
  if (grpc::Status s = stub->ListBlocks(&ctx, req, &r); !s.ok()) {
    return RpcFailed(g, "ListBlocks", s);
  }
  if (g.json) {
    PrintJson(r);
    return 0;
  }
  std::printf("%-34s %-18s %10s %-9s %6s %6s %8s\n", "KEY", "PARENT", "SIZE", "TIERS", "USES",
              "LEASES", "CHILDREN");
  for (const v1::BlockStatus& b : r.blocks()) {
    std::string tiers;
    for (int t : b.tiers()) {
      if (!tiers.empty()) tiers += ",";
      tiers += TierName(static_cast<v1::TierKind>(t));
    }
    std::string parent =
        b.parent_key().empty() ? "-" : absl::BytesToHexString(b.parent_key()).substr(0, 16);
    std::printf("%-34s %-18s %10s %-9s %6u %6u %8u\n", absl::BytesToHexString(b.key()).c_str(),
                parent.c_str(), HumanBytes(b.size_bytes()).c_str(), tiers.c_str(), b.uses(),
                b.leases(), b.children());
  }
  std::printf("%d of %llu blocks, most used first\n", r.blocks_size(),
              static_cast<unsigned long long>(r.total_blocks()));
  return 0;
}

int Evict(const Globals& g, const std::string& namespace_id, bool all_namespaces, bool progress) {
  if (namespace_id.empty() == !all_namespaces) {
    return LocalError("evict needs --namespace ID or --all (not both)");
  }
  auto stub = v1::Admin::NewStub(Connect(g));
  grpc::ClientContext ctx;  // no deadline: a large eviction takes what it takes
  v1::EvictRequest req;
  req.set_namespace_id(namespace_id);
  req.set_all_namespaces(all_namespaces);
  std::unique_ptr<grpc::ClientReader<v1::EvictProgress>> reader = stub->Evict(&ctx, req);
  ProgressBar bar("evict", progress && !g.json && isatty(STDERR_FILENO));
  v1::EvictProgress p, last;
  while (reader->Read(&p)) {
    last = p;
    bar.Update(p.blocks_evicted(), p.blocks_total(), "blocks");
  }
  bar.Finish();
  if (grpc::Status s = reader->Finish(); !s.ok()) return RpcFailed(g, "Evict", s);
  if (g.json) {
    PrintJson(last);
    return 0;
  }
  std::printf("evicted %llu blocks (%s)", static_cast<unsigned long long>(last.blocks_evicted()),
              HumanBytes(last.bytes_freed()).c_str());
  if (last.blocks_left() > 0) {
    std::printf("; %llu left: held by leases or in use, or parents of such blocks",
                static_cast<unsigned long long>(last.blocks_left()));
  }
  std::printf("\n");
  return 0;
}

int Watch(const Globals& g, double interval_s, int count) {
  if (!(interval_s >= 0.1)) return LocalError("--interval must be at least 0.1 s");
  const bool clear = !g.json && isatty(STDOUT_FILENO);
  v1::GetStatusResponse prev;
  auto prev_time = std::chrono::steady_clock::now();
  for (int i = 0; count <= 0 || i < count; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::duration<double>(interval_s));
    std::vector<TierRow> rows;
    v1::GetStatusResponse status;
    if (int rc = ReadTiers(g, &rows, &status); rc != 0) return rc;
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - prev_time).count();
    const v1::Counters& c = status.counters();
    const v1::Counters& p = prev.counters();
    auto rate = [&](uint64_t cur, uint64_t before) {
      return i == 0 || dt <= 0 ? 0.0 : static_cast<double>(cur - std::min(cur, before)) / dt;
    };
    const double lookups = rate(c.lookup_keys(), p.lookup_keys());
    const double hits = rate(c.lookup_hits(), p.lookup_hits());
    const double put_bps = rate(c.bytes_put(), p.bytes_put());
    const double get_bps = rate(c.bytes_get(), p.bytes_get());
    const double evictions = rate(c.evictions(), p.evictions());
    if (g.json) {
      nlohmann::json line = TierJson(rows, status);
      line["lookup_keys_per_s"] = lookups;
      line["lookup_hit_ratio_now"] = Ratio(hits, lookups);
      line["put_bytes_per_s"] = put_bps;
      line["get_bytes_per_s"] = get_bps;
      line["evictions_per_s"] = evictions;
      line["blocks"] = status.blocks();
      line["active_leases"] = status.active_leases();
      std::cout << line.dump() << std::endl;
    } else {
      if (clear) std::printf("\033[H\033[2J");
      const std::time_t t = std::time(nullptr);
      char when[32];
      std::strftime(when, sizeof(when), "%H:%M:%S", std::localtime(&t));
      std::printf("kvtierd %s at %s, up %llus  [%s, every %.1fs; Ctrl-C to stop]\n",
                  status.build().version().c_str(), g.addr.c_str(),
                  static_cast<unsigned long long>(status.uptime_seconds()), when, interval_s);
      std::printf("%llu blocks (%s) in %u namespaces, %u leases%s\n",
                  static_cast<unsigned long long>(status.blocks()),
                  HumanBytes(status.bytes()).c_str(), status.namespaces(), status.active_leases(),
                  status.nvme().degraded() ? ", NVMe DEGRADED" : "");
      std::printf("now: %.0f lookups/s (%.1f%% hit), put %s/s, get %s/s, %.0f evictions/s\n\n",
                  lookups, 100 * Ratio(hits, lookups),
                  HumanBytes(static_cast<uint64_t>(put_bps)).c_str(),
                  HumanBytes(static_cast<uint64_t>(get_bps)).c_str(), evictions);
      PrintTierTable(rows, status);
      std::fflush(stdout);
    }
    prev = status;
    prev_time = now;
  }
  return 0;
}

}  // namespace kvtier
