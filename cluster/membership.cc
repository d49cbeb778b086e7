#include "cluster/membership.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

bool HoldsChains(const MemberRecord& m) { return m.transport && m.role == "both"; }

// The record as it matters to peers: all but the free bytes.
bool SameButFree(MemberRecord a, const MemberRecord& b) {
  a.host_free_bytes = b.host_free_bytes;
  a.nvme_free_bytes = b.nvme_free_bytes;
  return a == b;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Membership>> Membership::Create(MembershipOptions options,
                                                               std::unique_ptr<EtcdClient> etcd,
                                                               MemberRecord self, Describe describe,
                                                               Clock* clock) {
  if (etcd == nullptr || clock == nullptr || !describe) {
    return absl::InvalidArgumentError("membership: etcd, describe and clock are required");
  }
  if (absl::Status s = ValidateNodeId(options.cluster); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster name: ", s.message()));
  }
  RETURN_IF_ERROR(ValidateNodeId(self.node_id));
  if (self.daemon_id.empty()) return absl::InvalidArgumentError("membership: empty daemon id");
  if (options.lease_ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError("membership: lease TTL must be at least 1 s");
  }
  return std::unique_ptr<Membership>(new Membership(std::move(options), std::move(etcd),
                                                    std::move(self), std::move(describe), clock));
}

Membership::Membership(MembershipOptions options, std::unique_ptr<EtcdClient> etcd,
                       MemberRecord self, Describe describe, Clock* clock)
    : options_(std::move(options)),
      etcd_(std::move(etcd)),
      self_(std::move(self)),
      describe_(std::move(describe)),
      clock_(clock),
      alone_(std::make_shared<RendezvousRing>(std::vector<std::string>{self_.node_id})),
      ring_(alone_) {}

Membership::~Membership() { Leave(); }

absl::Status Membership::RenewLease() {
  if (lease_ != 0) {
    const absl::Status alive = etcd_->KeepAlive(lease_);
    if (alive.ok()) return alive;
    if (alive.code() != absl::StatusCode::kNotFound) return alive;
    // Expired (etcd was away longer than the TTL): our record went with it.
    spdlog::warn("cluster: lease {} expired; registering again", lease_);
    lease_ = 0;
    published_.reset();
  }
  ASSIGN_OR_RETURN(lease_, etcd_->GrantLease(options_.lease_ttl));
  published_.reset();
  return absl::OkStatus();
}

absl::Status Membership::Publish() {
  MemberRecord record = describe_();
  record.node_id = self_.node_id;
  record.daemon_id = self_.daemon_id;
  const absl::Time now = clock_->Now();
  if (published_.has_value() && SameButFree(record, *published_) &&
      (*published_ == record || now - published_at_ < options_.capacity_refresh)) {
    return absl::OkStatus();
  }
  const absl::Status put =
      etcd_->Put(MemberKey(options_.cluster, self_.node_id), EncodeMemberRecord(record), lease_);
  if (put.code() == absl::StatusCode::kNotFound) lease_ = 0;  // regained next round
  RETURN_IF_ERROR(put);
  published_ = std::move(record);
  published_at_ = now;
  return absl::OkStatus();
}

absl::Status Membership::ReadMembers() {
  const std::string prefix = MembersPrefix(options_.cluster);
  ASSIGN_OR_RETURN(const std::vector<EtcdKeyValue> kvs, etcd_->GetPrefix(prefix));
  std::vector<MemberRecord> members;
  uint64_t bad = 0;
  for (const EtcdKeyValue& kv : kvs) {
    absl::StatusOr<MemberRecord> record = DecodeMemberRecord(kv.value);
    if (!record.ok() || kv.key != MemberKey(options_.cluster, record->node_id)) {
      ++bad;  // not ours to fix; said in View() and skipped
      continue;
    }
    members.push_back(std::move(record).value());
  }
  bool self_listed = false;
  std::string conflict;
  for (const MemberRecord& m : members) {
    if (m.node_id != self_.node_id) continue;
    self_listed = true;
    if (m.daemon_id != self_.daemon_id) {
      // Not overwritten back: two daemons rewriting one key would flap.
      conflict = absl::StrCat("node id ", self_.node_id, " is also claimed by daemon ", m.daemon_id,
                              " at ", m.address, "; give each daemon its own cluster.node_id");
    }
  }
  // Chains go only to members that can take them (offers are pushed to
  // the owner) and serve them (misses are pulled from it).
  std::vector<std::string> ids;
  for (const MemberRecord& m : members) {
    if (HoldsChains(m)) ids.push_back(m.node_id);
  }
  if (!self_listed && published_.has_value() && HoldsChains(*published_)) {
    ids.push_back(self_.node_id);
  }
  // Our record went missing (deleted by hand): publish again next round.
  if (!self_listed) published_.reset();
  auto ring = std::make_shared<const RendezvousRing>(std::move(ids));

  MutexLock lock(&mu_);
  std::map<std::string, std::string> before;
  for (const MemberRecord& m : view_.members) before[m.node_id] = m.daemon_id;
  for (const MemberRecord& m : members) {
    auto it = before.find(m.node_id);
    if (it == before.end()) {
      ++view_.joins;
      if (m.node_id != self_.node_id)
        spdlog::info("cluster: {} joined at {}", m.node_id, m.address);
    } else {
      if (it->second != m.daemon_id) {
        ++view_.restarts;
        spdlog::info("cluster: {} restarted (daemon {})", m.node_id, m.daemon_id);
      }
      before.erase(it);
    }
  }
  for (const auto& [node_id, daemon_id] : before) {
    ++view_.leaves;
    spdlog::info("cluster: {} left", node_id);
  }
  if (!view_.etcd_up && view_.failed_rounds > 0) spdlog::info("cluster: etcd reachable again");
  view_.etcd_up = true;
  view_.last_error.clear();
  view_.last_sync = clock_->Now();
  view_.lease = lease_;
  view_.members = std::move(members);
  view_.bad_records = bad;
  if (!conflict.empty() && conflict != view_.conflict) spdlog::error("cluster: {}", conflict);
  view_.conflict = std::move(conflict);
  ring_ = std::move(ring);
  return absl::OkStatus();
}

void Membership::RecordFailure(const absl::Status& status) {
  MutexLock lock(&mu_);
  if (view_.etcd_up || view_.failed_rounds == 0) {
    spdlog::warn(
        "cluster: etcd round failed ({}); serving from the last view for {}, then "
        "local-only",
        status.ToString(), absl::FormatDuration(options_.lease_ttl));
  }
  view_.etcd_up = false;
  view_.last_error = status.ToString();
  ++view_.failed_rounds;
}

absl::Status Membership::Tick() {
  MutexLock round(&round_mu_);
  if (left_) return absl::FailedPreconditionError("membership: this node has left the cluster");
  absl::Status status = RenewLease();
  if (status.ok()) status = Publish();
  if (status.ok()) status = ReadMembers();
  if (!status.ok()) RecordFailure(status);
  return status;
}

void Membership::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    // Rounds start a beat apart (a slow round shortens the wait after it),
    // so keepalives stay within the TTL while etcd answers at all.
    const absl::Duration beat = options_.lease_ttl / 3;
    absl::Duration wait;
    do {
      const absl::Time start = absl::Now();
      Tick().IgnoreError();  // kept in View() and logged on change
      wait = std::max(absl::ZeroDuration(), beat - (absl::Now() - start));
    } while (!stop_.WaitForNotificationWithTimeout(wait));
  });
}

void Membership::Leave() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
  MutexLock round(&round_mu_);
  if (left_) return;
  left_ = true;
  bool etcd_up = false;
  {
    MutexLock lock(&mu_);
    etcd_up = view_.etcd_up;
  }
  // Not when etcd was away: the lease expires there on its own, and a
  // shutdown does not wait on a dead etcd.
  if (lease_ != 0 && etcd_up) {
    const absl::Status revoked = etcd_->RevokeLease(lease_);
    if (!revoked.ok()) {
      spdlog::warn(
          "cluster: could not revoke lease {} ({}); the others drop this node when it "
          "expires",
          lease_, revoked.ToString());
    }
  }
  lease_ = 0;
  MutexLock lock(&mu_);
  view_.lease = 0;
  view_.etcd_up = false;
  view_.members.clear();
  ring_ = alone_;
}

MembershipView Membership::View() const {
  MutexLock lock(&mu_);
  MembershipView view = view_;
  view.local_only = ring_ == alone_ || clock_->Now() - view_.last_sync > options_.lease_ttl;
  return view;
}

std::string Membership::AddressOf(absl::string_view node_id) const {
  MutexLock lock(&mu_);
  for (const MemberRecord& m : view_.members) {
    if (m.node_id == node_id) return m.address;
  }
  return "";
}

std::shared_ptr<const RendezvousRing> Membership::Ring() const {
  MutexLock lock(&mu_);
  if (clock_->Now() - view_.last_sync > options_.lease_ttl) return alone_;
  return ring_;
}

}  // namespace kvtier
