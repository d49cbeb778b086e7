#include "storage/tenant_quotas.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

std::string Who(absl::string_view tenant) {
  return tenant.empty() ? std::string("this daemon's tenant")
                        : absl::StrCat("tenant '", tenant, "'");
}

// Subtracts without wrapping: a refund never exceeds what was charged, but
// a bug must not turn into an unbounded quota.
template <typename T>
void Take(T& from, uint64_t n) {
  from = n > from ? T{0} : static_cast<T>(from - n);
}

}  // namespace

TenantUsage& TenantQuotas::Of(absl::string_view tenant) { return usage_[tenant]; }

void TenantQuotas::Tidy(absl::string_view tenant) {
  auto it = usage_.find(tenant);
  if (it != usage_.end() && it->second.empty()) usage_.erase(it);
}

absl::Status TenantQuotas::ChargeNamespace(absl::string_view tenant) {
  // Checks read a copy (a refusal adds no entry); only a charge writes.
  const TenantUsage u = Usage(tenant);
  if (u.namespaces >= limits_.max_namespaces) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Who(tenant), " already has ", u.namespaces,
                     " namespaces open (limits.tenant_max_namespaces); close some"));
  }
  ++Of(tenant).namespaces;
  return absl::OkStatus();
}

void TenantQuotas::RefundNamespace(absl::string_view tenant) {
  Take(Of(tenant).namespaces, 1);
  Tidy(tenant);
}

absl::Status TenantQuotas::ChargeLease(absl::string_view tenant, uint64_t blocks) {
  const TenantUsage u = Usage(tenant);
  if (u.leases >= limits_.max_leases) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Who(tenant), " already holds ", u.leases,
                     " leases (limits.tenant_max_leases); release some"));
  }
  if (blocks > limits_.max_lease_blocks - std::min(u.lease_blocks, limits_.max_lease_blocks)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Who(tenant), "'s leases already pin ", u.lease_blocks, " blocks; ", blocks,
                     " more would pass limits.tenant_max_lease_blocks (", limits_.max_lease_blocks,
                     "); release some"));
  }
  TenantUsage& charged = Of(tenant);
  ++charged.leases;
  charged.lease_blocks += blocks;
  return absl::OkStatus();
}

void TenantQuotas::RefundLease(absl::string_view tenant, uint64_t blocks) {
  TenantUsage& u = Of(tenant);
  Take(u.leases, 1);
  Take(u.lease_blocks, blocks);
  Tidy(tenant);
}

absl::Status TenantQuotas::ChargeReservation(absl::string_view tenant, uint64_t bytes) {
  const TenantUsage u = Usage(tenant);
  if (bytes > limits_.max_reserved_bytes - std::min(u.reserved_bytes, limits_.max_reserved_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Who(tenant), "'s unfinished writes already reserve ", u.reserved_bytes,
                     " host bytes; ", bytes, " more would pass limits.tenant_reserved_bytes (",
                     limits_.max_reserved_bytes, "); finish or cancel some"));
  }
  Of(tenant).reserved_bytes += bytes;
  return absl::OkStatus();
}

void TenantQuotas::RefundReservation(absl::string_view tenant, uint64_t bytes) {
  Take(Of(tenant).reserved_bytes, bytes);
  Tidy(tenant);
}

TenantUsage TenantQuotas::Usage(absl::string_view tenant) const {
  auto it = usage_.find(tenant);
  return it == usage_.end() ? TenantUsage{} : it->second;
}

}  // namespace kvtier
