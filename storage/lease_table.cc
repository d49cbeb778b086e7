#include "storage/lease_table.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_format.h"

namespace kvtier {

std::string LeaseTable::Add(Lease lease) {
  std::string id;
  do {
    id = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                         absl::Uniform<uint64_t>(bitgen_));
  } while (leases_.contains(id));
  expiry_.emplace(lease.expiry, id);
  leases_.emplace(id, std::move(lease));
  return id;
}

const Lease* LeaseTable::Find(absl::string_view id, absl::string_view tenant) const {
  auto it = leases_.find(id);
  if (it == leases_.end() || it->second.tenant != tenant) return nullptr;
  return &it->second;
}

std::optional<Lease> LeaseTable::Remove(const std::string& id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return std::nullopt;
  Lease lease = std::move(it->second);
  leases_.erase(it);
  for (auto [e, end] = expiry_.equal_range(lease.expiry); e != end; ++e) {
    if (e->second == id) {
      expiry_.erase(e);
      break;
    }
  }
  return lease;
}

std::vector<Lease> LeaseTable::Expire(absl::Time now) {
  std::vector<Lease> out;
  while (!expiry_.empty() && expiry_.begin()->first <= now) {
    const std::string id = expiry_.begin()->second;
    if (std::optional<Lease> lease = Remove(id)) out.push_back(std::move(*lease));
  }
  return out;
}

std::vector<std::string> LeaseTable::IdsIn(const NamespaceId& ns) const {
  std::vector<std::string> ids;
  for (const auto& [id, lease] : leases_) {
    if (lease.ns == ns) ids.push_back(id);
  }
  return ids;
}

}  // namespace kvtier
