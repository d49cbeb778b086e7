#include "cluster/testing/fake_etcd.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvtier {

void FakeEtcd::Expire() {
  const absl::Time now = clock_->Now();
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires > now) {
      ++it;
      continue;
    }
    std::erase_if(keys_, [id = it->first](const auto& kv) { return kv.second.lease == id; });
    it = leases_.erase(it);
  }
}

absl::Status FakeEtcd::CheckReachable() const {
  return reachable_ ? absl::OkStatus() : absl::UnavailableError("fake etcd unreachable");
}

absl::StatusOr<int64_t> FakeEtcd::GrantLease(absl::Duration ttl) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  const absl::Duration whole = absl::Seconds(
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(ttl)))));
  const int64_t id = next_lease_++;
  leases_[id] = Lease{whole, clock_->Now() + whole};
  return id;
}

absl::Status FakeEtcd::KeepAlive(int64_t lease) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  Expire();
  auto it = leases_.find(lease);
  if (it == leases_.end()) return absl::NotFoundError(absl::StrCat("lease ", lease, " expired"));
  it->second.expires = clock_->Now() + it->second.ttl;
  return absl::OkStatus();
}

absl::Status FakeEtcd::RevokeLease(int64_t lease) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  leases_.erase(lease);
  std::erase_if(keys_, [lease](const auto& kv) { return kv.second.lease == lease; });
  return absl::OkStatus();
}

absl::Status FakeEtcd::Put(absl::string_view key, absl::string_view value, int64_t lease) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  Expire();
  if (lease != 0 && !leases_.contains(lease)) {
    return absl::NotFoundError("etcdserver: requested lease not found");
  }
  keys_[std::string(key)] = EtcdKeyValue{std::string(key), std::string(value), lease};
  ++puts_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EtcdKeyValue>> FakeEtcd::GetPrefix(absl::string_view prefix) {
  MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  Expire();
  std::vector<EtcdKeyValue> out;
  for (const auto& [key, kv] : keys_) {
    if (absl::StartsWith(key, prefix)) out.push_back(kv);
  }
  return out;
}

void FakeEtcd::set_reachable(bool reachable) {
  MutexLock lock(&mu_);
  reachable_ = reachable;
}

int FakeEtcd::puts() const {
  MutexLock lock(&mu_);
  return puts_;
}

}  // namespace kvtier
