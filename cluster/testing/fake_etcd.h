// FakeEtcd: an in-memory EtcdClient for tests. Leases expire by the
// FakeClock it is given (a lease lives its TTL past its grant or last
// KeepAlive); set_reachable(false) makes every call UNAVAILABLE, as a dead
// etcd would. Several Membership objects sharing one FakeEtcd see one
// cluster.
//
// Thread-safety: thread-safe.
#ifndef KVTIER_CLUSTER_TESTING_FAKE_ETCD_H_
#define KVTIER_CLUSTER_TESTING_FAKE_ETCD_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "cluster/etcd_client.h"

namespace kvtier {

class FakeEtcd final : public EtcdClient {
 public:
  explicit FakeEtcd(Clock* clock) : clock_(clock) {}

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override;
  absl::Status KeepAlive(int64_t lease) override;
  absl::Status RevokeLease(int64_t lease) override;
  absl::Status Put(absl::string_view key, absl::string_view value, int64_t lease) override;
  absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(absl::string_view prefix) override;

  void set_reachable(bool reachable);
  int puts() const;  // successful Puts so far

 private:
  struct Lease {
    absl::Duration ttl;
    absl::Time expires;
  };
  // Drops expired leases and their keys.
  void Expire() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckReachable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  mutable Mutex mu_;
  bool reachable_ ABSL_GUARDED_BY(mu_) = true;
  int64_t next_lease_ ABSL_GUARDED_BY(mu_) = 7001;
  int puts_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Lease> leases_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, EtcdKeyValue> keys_ ABSL_GUARDED_BY(mu_);
};

// An EtcdClient that forwards to a FakeEtcd it does not own: what each
// member of a test cluster is given, so that all of them share one etcd.
class FakeEtcdClient final : public EtcdClient {
 public:
  explicit FakeEtcdClient(FakeEtcd* etcd) : etcd_(etcd) {}
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override { return etcd_->GrantLease(ttl); }
  absl::Status KeepAlive(int64_t lease) override { return etcd_->KeepAlive(lease); }
  absl::Status RevokeLease(int64_t lease) override { return etcd_->RevokeLease(lease); }
  absl::Status Put(absl::string_view key, absl::string_view value, int64_t lease) override {
    return etcd_->Put(key, value, lease);
  }
  absl::StatusOr<std::vector<EtcdKeyValue>> GetPrefix(absl::string_view prefix) override {
    return etcd_->GetPrefix(prefix);
  }

 private:
  FakeEtcd* const etcd_;
};

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_TESTING_FAKE_ETCD_H_
