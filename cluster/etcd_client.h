// EtcdClient: the part of etcd's v3 API kvtier's cluster uses: leases, puts
// under a lease, prefix reads. A seam: EtcdGatewayClient speaks to a real
// etcd, FakeEtcd (testing/) keeps the keys in memory under a FakeClock.
//
// Errors: UNAVAILABLE when no endpoint answered (every call is bounded by
// the client's own timeout, so a dead etcd never stalls a caller for
// longer); NOT_FOUND when the lease named is gone (expired or revoked);
// other codes as etcd reports them.
//
// Thread-safety: implementations are thread-safe.
#ifndef KVTIER_CLUSTER_ETCD_CLIENT_H_
#define KVTIER_CLUSTER_ETCD_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kvtier {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t lease = 0;  // 0: none
};

class EtcdClient {
 public:
  virtual ~EtcdClient() = default;

  // A new lease that lives `ttl` (whole seconds, at least 1) past its last
  // KeepAlive; its id.
  virtual absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) = 0;
  // Restarts the lease's TTL. NOT_FOUND when it is gone.
  virtual absl::Status KeepAlive(int64_t lease) = 0;
  // Ends the lease now, deleting the keys attached to it. OK when it was
  // already gone.
  virtual absl::Status RevokeLease(int64_t lease) = 0;
  // Sets `key` to `value`, attached to `lease` (0: none). NOT_FOUND when the
  // lease is gone.
  virtual absl::Status Put(absl::string_view key, absl::string_view value, int64_t lease) = 0;
  // Every key starting with `prefix`, in key order.
  virtual absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(absl::string_view prefix) = 0;
};

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_ETCD_CLIENT_H_
