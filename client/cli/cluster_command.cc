#include "client/cli/cluster_command.h"

#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/daemon_connection.h"

namespace kvtier {
namespace {

struct ClusterFlags {
  std::string ns;
  std::vector<std::string> owner_keys;
};

// The block events this daemon publishes for routers.
void PrintEvents(const v1::EventsStatus& e) {
  std::cout << "block events: " << e.reported() << " reported, " << e.subscribers()
            << " subscribers (" << e.subscribers_lost() << " dropped for falling behind)\n";
  if (e.zmq_endpoint().empty()) {
    std::cout << "  kv events (zmq): off (set events.zmq_endpoint)\n";
    return;
  }
  std::cout << "  kv events (zmq) on " << e.zmq_endpoint() << ", replay "
            << (e.zmq_replay_endpoint().empty() ? "off" : e.zmq_replay_endpoint()) << ": "
            << e.zmq_events() << " events published in " << e.zmq_messages() << " messages, "
            << e.zmq_resyncs() << " resyncs\n";
}

int Cluster(const Globals& g, const ClusterFlags& flags) {
  v1::GetClusterRequest request;
  if (!flags.owner_keys.empty() && flags.ns.empty()) {
    return LocalError("--owner needs --namespace (see `kvtier namespaces`)");
  }
  std::vector<std::string> keys;
  if (int rc = UnhexKeys(flags.owner_keys, &keys); rc != 0) return rc;
  request.set_namespace_id(flags.ns);
  for (std::string& k : keys) request.add_keys(std::move(k));

  auto stub = v1::Admin::NewStub(Connect(g));
  v1::GetClusterResponse r;
  {
    grpc::ClientContext ctx;
    SetDeadline(g, &ctx);
    grpc::Status s = stub->GetCluster(&ctx, request, &r);
    if (!s.ok()) return RpcFailed(g, "GetCluster", s);
  }
  if (g.json) {
    PrintJson(r);
    return 0;
  }
  if (!r.enabled()) {
    std::cout << "not in a cluster: cluster.etcd is unset, the daemon runs alone\n";
    PrintEvents(r.events());
    return 0;
  }
  // The bandwidth this daemon observed to each peer it has moved blocks with.
  std::map<std::string, double> observed;
  {
    v1::ListPeersResponse peers;
    grpc::ClientContext ctx;
    SetDeadline(g, &ctx);
    if (stub->ListPeers(&ctx, v1::ListPeersRequest(), &peers).ok()) {
      for (const v1::PeerStatus& p : peers.peers()) {
        observed[p.address()] = p.observed_bytes_per_second();
      }
    }
  }
  std::cout << "cluster " << r.name() << ", this node " << r.node_id() << "\n"
            << "etcd " << absl::StrJoin(r.etcd_endpoints(), ",") << ": "
            << (r.etcd_up() ? "up" : "UNREACHABLE");
  if (r.last_sync_unix_ms() != 0) {
    const absl::Duration ago = absl::Now() - absl::FromUnixMillis(r.last_sync_unix_ms());
    std::cout << ", last read " << absl::FormatDuration(absl::Trunc(ago, absl::Milliseconds(100)))
              << " ago";
  }
  std::cout << ", lease TTL " << r.lease_ttl_ms() / 1000 << " s\n";
  if (!r.last_error().empty()) std::cout << "last error: " << r.last_error() << "\n";
  if (r.local_only()) {
    std::cout << "LOCAL-ONLY: no fresh view of the cluster; this node serves alone and owns "
                 "every key\n";
  }
  if (!r.conflict().empty()) std::cout << "CONFLICT: " << r.conflict() << "\n";
  std::cout << r.members_size() << " members (" << r.joins() << " joins, " << r.leaves()
            << " leaves, " << r.restarts() << " restarts seen; " << r.failed_rounds()
            << " failed rounds";
  if (r.bad_records() > 0) std::cout << "; " << r.bad_records() << " unreadable records";
  std::cout << ")\n";
  for (const v1::ClusterMember& m : r.members()) {
    std::cout << "  " << m.node_id() << (m.self() ? " (self)" : "") << "  " << m.address() << "  "
              << (m.role().empty() ? "?" : m.role()) << "  daemon " << m.daemon_id() << "\n"
              << "    owns " << std::fixed << std::setprecision(1) << 100 * m.key_share()
              << "% of keys; host " << HumanBytes(m.host_free_bytes()) << " free of "
              << HumanBytes(m.host_capacity_bytes());
    if (m.nvme_capacity_bytes() > 0) {
      std::cout << ", nvme " << HumanBytes(m.nvme_free_bytes()) << " free of "
                << HumanBytes(m.nvme_capacity_bytes());
    }
    std::cout << "; transfer " << (m.transport() ? "ucx" : "off");
    if (auto it = observed.find(m.address()); it != observed.end()) {
      std::cout << ", observed " << HumanBytes(static_cast<uint64_t>(it->second)) << "/s";
    }
    std::cout << "\n";
  }
  const v1::ClusterTierStatus& t = r.tier();
  if (!t.enabled()) {
    std::cout << "shared tier: off (" << t.detail() << ")\n";
  } else {
    std::cout << "shared tier: pulled " << t.pulled_blocks() << " blocks ("
              << HumanBytes(t.pulled_bytes()) << ") in " << t.fills() << " fills, "
              << t.pulls_declined() << " declined by the cost model, " << t.pull_failures()
              << " failed, " << t.pulls_backed_off() << " backed off\n"
              << "             offered " << t.offers() << " chains (" << t.offered_blocks()
              << " blocks taken), " << t.offer_failures() << " failed, " << t.offers_dropped()
              << " dropped\n";
  }
  PrintEvents(r.events());
  for (int i = 0; i < r.owners_size() && i < request.keys_size(); ++i) {
    std::cout << "owner " << absl::BytesToHexString(request.keys(i)) << " " << r.owners(i) << "\n";
  }
  return 0;
}

}  // namespace

void RegisterClusterCommand(CLI::App& app, CommandSet* commands) {
  auto flags = std::make_shared<ClusterFlags>();
  auto* cluster = app.add_subcommand(
      "cluster", "cluster members, etcd status, each member's share of keys; owners of blocks");
  cluster->add_option("--namespace", flags->ns, "namespace id of the --owner keys");
  cluster->add_option("--owner", flags->owner_keys, "block keys (hex) whose owner to print");
  commands->Add(cluster, [flags](const Globals& g) { return Cluster(g, *flags); });
}

}  // namespace kvtier
