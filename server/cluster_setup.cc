#include "server/cluster_setup.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "cluster/etcd_gateway_client.h"
#include "server/build_info.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<Membership>> JoinCluster(const DaemonConfig& config,
                                                        const ClusterSelf& self, BlockCache* cache,
                                                        Clock* clock) {
  if (config.cluster_etcd.empty()) return nullptr;
  EtcdGatewayOptions etcd;
  for (absl::string_view e : absl::StrSplit(config.cluster_etcd, ',', absl::SkipWhitespace())) {
    etcd.endpoints.emplace_back(absl::StripAsciiWhitespace(e));
  }
  etcd.timeout = absl::Milliseconds(config.cluster_etcd_timeout_ms);
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdGatewayClient> client,
                   EtcdGatewayClient::Create(std::move(etcd)));

  MemberRecord record;
  record.address = config.cluster_advertise.empty() ? self.bound_address : config.cluster_advertise;
  record.node_id = config.cluster_node_id.empty() ? record.address : config.cluster_node_id;
  record.daemon_id = self.daemon_id;
  record.role = config.peer_role;
  record.version = kKvtierVersion;
  record.transport = self.transport;
  record.started = clock->Now();
  auto describe = [record, cache] {
    MemberRecord r = record;
    const CacheSnapshot snap = cache->Snapshot();
    r.host_capacity_bytes = snap.host.capacity_bytes;
    r.host_free_bytes =
        snap.host.capacity_bytes - std::min(snap.host.used_bytes, snap.host.capacity_bytes);
    if (snap.nvme.enabled) {
      r.nvme_capacity_bytes = snap.nvme.tier.capacity_bytes;
      r.nvme_free_bytes = snap.nvme.tier.capacity_bytes -
                          std::min(snap.nvme.tier.used_bytes, snap.nvme.tier.capacity_bytes);
    }
    return r;
  };
  MembershipOptions options;
  options.cluster = config.cluster_name;
  options.lease_ttl = absl::Milliseconds(config.cluster_lease_ttl_ms);
  ASSIGN_OR_RETURN(
      std::unique_ptr<Membership> membership,
      Membership::Create(options, std::move(client), record, std::move(describe), clock));
  membership->Start();
  spdlog::info("cluster: member {} of '{}' at {} (etcd {}, lease {} s)", record.node_id,
               config.cluster_name, record.address, config.cluster_etcd,
               config.cluster_lease_ttl_ms / 1000);
  return membership;
}

}  // namespace kvtier
