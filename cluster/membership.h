// Membership: this daemon as one member of the cluster `cluster` in etcd.
// It keeps its MemberRecord under `/kvtier/<cluster>/members/<node_id>`,
// attached to a lease of `lease_ttl` that it renews every lease_ttl / 3,
// and reads the other members' records on the same beat (a prefix read,
// not an etcd watch: the gateway's watch is a long-poll stream, and a read
// every few seconds of a few hundred bytes per member costs nothing). A
// member whose daemon dies stops renewing; etcd drops its record when the
// lease expires, and the others drop it from the ring on their next read:
// within lease_ttl + lease_ttl / 3 of its death.
//
// When etcd cannot be reached, the last view is trusted for lease_ttl
// (the others' leases could not have expired sooner, as etcd's own clock
// stopped with it from our point of view); past that the ring is this node
// alone: local-only service, never a stall. `View().local_only` and
// `etcd_up` say which.
//
// Invariant: Ring() holds the node ids of the members last read from etcd
// that can hold chains (a peer transport and peer.role both; this node's
// too when it can), or this node's alone when that read is older than
// lease_ttl; never a member whose record was absent from the last read.
//
// Thread-safety: thread-safe. Tick() runs on the thread Start() makes, or
// on the test's.
#ifndef KVTIER_CLUSTER_MEMBERSHIP_H_
#define KVTIER_CLUSTER_MEMBERSHIP_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "cluster/etcd_client.h"
#include "cluster/member_record.h"
#include "cluster/rendezvous.h"

namespace kvtier {

struct MembershipOptions {
  std::string cluster = "kvtier";
  absl::Duration lease_ttl = absl::Seconds(5);  // whole seconds, >= 1 s
  // A record whose only change is its free bytes is rewritten at most this
  // often (each Put is an etcd revision).
  absl::Duration capacity_refresh = absl::Seconds(30);
};

struct MembershipView {
  bool etcd_up = false;                         // the last round reached etcd
  bool local_only = true;                       // the ring is this node alone
  std::string last_error;                       // of the last failed round; "" after a good one
  absl::Time last_sync = absl::InfinitePast();  // of the last good round
  int64_t lease = 0;
  std::vector<MemberRecord> members;  // the last read, by node id
  uint64_t joins = 0;                 // node ids that appeared
  uint64_t leaves = 0;                // node ids that disappeared
  uint64_t restarts = 0;              // node ids whose daemon id changed
  uint64_t failed_rounds = 0;
  uint64_t bad_records = 0;  // in the last read, skipped as malformed
  std::string conflict;      // another daemon holds this node id; "" normally
};

class Membership {
 public:
  // The record to publish, asked each round (its free bytes change);
  // Membership fills node_id and daemon_id from `self`.
  using Describe = std::function<MemberRecord()>;

  // INVALID_ARGUMENT for an invalid cluster name or node id, or a lease TTL
  // under 1 s. Does not contact etcd (Tick does).
  static absl::StatusOr<std::unique_ptr<Membership>> Create(MembershipOptions options,
                                                            std::unique_ptr<EtcdClient> etcd,
                                                            MemberRecord self, Describe describe,
                                                            Clock* clock);
  ~Membership();  // Leave()
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // One round: renew (or regain) the lease, publish the record when it
  // changed, read the members. The round's error, if any, is also kept in
  // View().
  absl::Status Tick();
  // Runs Tick every lease_ttl / 3 on a thread of its own until Leave().
  void Start();
  // Stops the thread and revokes the lease, so the others drop this node
  // on their next read rather than at expiry. Idempotent.
  void Leave();

  MembershipView View() const;
  // The address a member (by node id) advertised in the last read; "" when
  // it is not in it.
  std::string AddressOf(absl::string_view node_id) const;
  std::shared_ptr<const RendezvousRing> Ring() const;
  const std::string& node_id() const { return self_.node_id; }
  const MembershipOptions& options() const { return options_; }

 private:
  Membership(MembershipOptions options, std::unique_ptr<EtcdClient> etcd, MemberRecord self,
             Describe describe, Clock* clock);
  // Keeps lease_ alive, granting a new one when there is none.
  absl::Status RenewLease() ABSL_EXCLUSIVE_LOCKS_REQUIRED(round_mu_);
  absl::Status Publish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(round_mu_);
  absl::Status ReadMembers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(round_mu_);
  void RecordFailure(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  const MembershipOptions options_;
  const std::unique_ptr<EtcdClient> etcd_;
  const MemberRecord self_;  // node_id, daemon_id
  const Describe describe_;
  Clock* const clock_;
  const std::shared_ptr<const RendezvousRing> alone_;

  // Serializes rounds (Tick from the thread and from Leave's caller).
  Mutex round_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  int64_t lease_ ABSL_GUARDED_BY(round_mu_) = 0;
  std::optional<MemberRecord> published_ ABSL_GUARDED_BY(round_mu_);
  absl::Time published_at_ ABSL_GUARDED_BY(round_mu_) = absl::InfinitePast();
  bool left_ ABSL_GUARDED_BY(round_mu_) = false;

  mutable Mutex mu_;
  MembershipView view_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const RendezvousRing> ring_ ABSL_GUARDED_BY(mu_);

  Notification stop_;
  std::thread thread_;  // touched only by Start and Leave's caller
};

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_MEMBERSHIP_H_
