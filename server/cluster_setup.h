// JoinCluster: the Membership a daemon's cluster.* keys ask for, started
// (docs/operations.md#cluster). The member's record: node id
// cluster.node_id (default the advertised address), the daemon id of this
// start, the advertised address (cluster.advertise, default the bound
// server.listen), peer.role, whether peer transfer is available, and the
// host and NVMe tiers' capacity and free bytes (read each round).
//
// Never waits on etcd: the first round runs on the membership's thread, so
// a daemon whose etcd is down starts and serves alone until etcd answers.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_SERVER_CLUSTER_SETUP_H_
#define KVTIER_SERVER_CLUSTER_SETUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cluster/membership.h"
#include "server/config.h"
#include "storage/block_cache.h"

namespace kvtier {

struct ClusterSelf {
  std::string bound_address;  // server.listen as bound
  std::string daemon_id;
  bool transport = false;
};

// Null when cluster.etcd is unset. `cache` and `clock` must outlive the
// result. INVALID_ARGUMENT for settings ValidateConfig would refuse.
absl::StatusOr<std::unique_ptr<Membership>> JoinCluster(const DaemonConfig& config,
                                                        const ClusterSelf& self, BlockCache* cache,
                                                        Clock* clock);

}  // namespace kvtier

#endif  // KVTIER_SERVER_CLUSTER_SETUP_H_
