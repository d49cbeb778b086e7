// MemberRecord: what one kvtierd tells the cluster about itself, the value
// of its key `/kvtier/<cluster>/members/<node_id>` in etcd (JSON, so an
// operator can read it with `etcdctl get --prefix /kvtier/`).
//
// node_id is stable across restarts (the advertised address by default) and
// is what the hash ring is built from, so a restarted node owns the same
// keys; daemon_id changes on every start, so peers that see it change know
// the node restarted and drop what they staged for its previous life.
#ifndef KVTIER_CLUSTER_MEMBER_RECORD_H_
#define KVTIER_CLUSTER_MEMBER_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kvtier {

struct MemberRecord {
  std::string node_id;     // stable; 1-128 of [A-Za-z0-9._:[]-]
  std::string daemon_id;   // this start of the daemon
  std::string address;     // gRPC address peers and engines dial
  std::string role;        // "engine-node" unless configured
  std::string version;     // kvtier version that wrote it
  bool transport = false;  // serves peer transfers (UCX)
  uint64_t host_capacity_bytes = 0;
  uint64_t host_free_bytes = 0;
  uint64_t nvme_capacity_bytes = 0;
  uint64_t nvme_free_bytes = 0;
  absl::Time started = absl::UnixEpoch();

  friend bool operator==(const MemberRecord&, const MemberRecord&) = default;
};

// INVALID_ARGUMENT naming the offending character unless `id` is a valid
// node id (1-128 of [A-Za-z0-9._:[]-], so an IPv6 "[::1]:50051" is one;
// no '/', which would nest keys).
absl::Status ValidateNodeId(absl::string_view id);

std::string EncodeMemberRecord(const MemberRecord& record);
// INVALID_ARGUMENT for anything but an object with a valid node_id, a
// non-empty daemon_id and address, and fields of the right types; unknown
// fields are ignored (a newer member may write more).
absl::StatusOr<MemberRecord> DecodeMemberRecord(absl::string_view json);

// "/kvtier/<cluster>/members/" and that plus the node id.
std::string MembersPrefix(absl::string_view cluster);
std::string MemberKey(absl::string_view cluster, absl::string_view node_id);

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_MEMBER_RECORD_H_
