// The Admin.GetCluster answer from a Membership: proto conversion only.
//
// Thread-safety: stateless; reads the Membership's thread-safe views.
#ifndef KVTIER_SERVER_CLUSTER_VIEW_H_
#define KVTIER_SERVER_CLUSTER_VIEW_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "cluster/cluster_tier.h"
#include "cluster/membership.h"
#include "kvtier/v1/admin.pb.h"

namespace kvtier {

// Fills `response`; `membership` null means the daemon runs alone
// (enabled false). INVALID_ARGUMENT, with nothing filled, for a bad
// namespace id, a bad key, keys without a namespace, or over `max_keys`.
// `tier` null: no shared tier (`tier_note` says why).
absl::Status ClusterToProto(const Membership* membership, const ClusterTier* tier,
                            const std::string& tier_note, const std::string& etcd_endpoints,
                            const v1::GetClusterRequest& request, uint32_t max_keys,
                            v1::GetClusterResponse* response);

}  // namespace kvtier

#endif  // KVTIER_SERVER_CLUSTER_VIEW_H_
