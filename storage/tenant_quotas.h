// TenantQuotas: how much of the daemon's shared capacity one tenant may hold
// at once, so that a tenant that fills a limit denies only itself
// (invariant 8). The daemon-wide limits (BlockCacheOptions::max_namespaces,
// max_leases) still bound the sum; these bound each tenant's share of it.
// With authentication off every caller is the one tenant "".
//
// Counted per tenant: open namespaces, active leases, blocks pinned by
// leases (a lease costs memory per block it pins), and host-tier bytes
// reserved by writes not yet committed (Put streams, Save groups, peer
// landings), which no eviction can reclaim while they are open.
//
// Thread-safety: not thread-safe; the owner (BlockCache) serializes every
// call under its mutex.
#ifndef KVTIER_STORAGE_TENANT_QUOTAS_H_
#define KVTIER_STORAGE_TENANT_QUOTAS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kvtier {

struct TenantLimits {
  uint32_t max_namespaces = 256;
  uint32_t max_leases = 16384;
  // Blocks pinned by one tenant's leases, summed over its leases (about 8
  // bytes of daemon memory each, plus the pin itself).
  uint64_t max_lease_blocks = uint64_t{1} << 21;
  // Host bytes one tenant's unfinished writes may hold reserved.
  uint64_t max_reserved_bytes = uint64_t{1} << 30;
};

struct TenantUsage {
  uint32_t namespaces = 0;
  uint32_t leases = 0;
  uint64_t lease_blocks = 0;
  uint64_t reserved_bytes = 0;
  bool empty() const {
    return namespaces == 0 && leases == 0 && lease_blocks == 0 && reserved_bytes == 0;
  }
};

class TenantQuotas {
 public:
  explicit TenantQuotas(const TenantLimits& limits) : limits_(limits) {}

  const TenantLimits& limits() const { return limits_; }

  // Each Charge either takes its share and returns OK, or returns
  // RESOURCE_EXHAUSTED naming the tenant's limit and changes nothing. Each
  // Refund gives back exactly what a successful Charge took.
  absl::Status ChargeNamespace(absl::string_view tenant);
  void RefundNamespace(absl::string_view tenant);
  absl::Status ChargeLease(absl::string_view tenant, uint64_t blocks);
  void RefundLease(absl::string_view tenant, uint64_t blocks);
  absl::Status ChargeReservation(absl::string_view tenant, uint64_t bytes);
  void RefundReservation(absl::string_view tenant, uint64_t bytes);

  TenantUsage Usage(absl::string_view tenant) const;
  // Tenants holding anything now.
  size_t tenants() const { return usage_.size(); }

 private:
  TenantUsage& Of(absl::string_view tenant);
  void Tidy(absl::string_view tenant);

  const TenantLimits limits_;
  absl::flat_hash_map<std::string, TenantUsage> usage_;  // no empty entries
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_TENANT_QUOTAS_H_
