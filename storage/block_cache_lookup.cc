// BlockCache's Lookups and leases: Lookup, TryLookup (the same without
// waiting for the cache's lock), Release and lease expiry. One piece of the
// BlockCache class (see block_cache.h).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "storage/block_cache.h"

namespace kvtier {

absl::StatusOr<LookupResult> BlockCache::Lookup(const NamespaceId& ns,
                                                absl::Span<const BlockKey> keys, bool take_lease,
                                                absl::Duration lease_ttl, CutChooser* chooser) {
  RETURN_IF_ERROR(CheckLookup(keys.size(), take_lease, lease_ttl));
  MutexLock lock(&mu_);
  return LookupLocked(ns, std::nullopt, keys, take_lease, lease_ttl, chooser);
}

absl::StatusOr<std::optional<LookupResult>> BlockCache::TryLookup(
    const NamespaceId& ns, absl::string_view tenant, absl::Span<const BlockKey> keys,
    bool take_lease, absl::Duration lease_ttl, CutChooser* chooser) {
  RETURN_IF_ERROR(CheckLookup(keys.size(), take_lease, lease_ttl));
  if (!mu_.TryLock()) return std::optional<LookupResult>();
  absl::StatusOr<LookupResult> r = LookupLocked(ns, tenant, keys, take_lease, lease_ttl, chooser);
  mu_.Unlock();
  if (!r.ok()) return r.status();
  return std::optional<LookupResult>(*std::move(r));
}

absl::Status BlockCache::CheckLookup(size_t keys, bool take_lease, absl::Duration lease_ttl) const {
  RETURN_IF_ERROR(CheckKeyCount(keys));
  if (lease_ttl < absl::ZeroDuration() || lease_ttl > options_.max_lease_ttl) {
    return absl::InvalidArgumentError(absl::StrCat("lease TTL ", absl::FormatDuration(lease_ttl),
                                                   " is above the maximum of ",
                                                   absl::FormatDuration(options_.max_lease_ttl)));
  }
  if (!take_lease && lease_ttl != absl::ZeroDuration()) {
    return absl::InvalidArgumentError("lease_ttl_ms is set but take_lease is false");
  }
  return absl::OkStatus();
}

absl::StatusOr<LookupResult> BlockCache::LookupLocked(const NamespaceId& ns,
                                                      std::optional<absl::string_view> caller,
                                                      absl::Span<const BlockKey> keys,
                                                      bool take_lease, absl::Duration lease_ttl,
                                                      CutChooser* chooser) {
  ExpireLeasesLocked();
  ASSIGN_OR_RETURN(auto* entry, namespaces_.FindOpen(ns));
  // As CheckTenant: another tenant's namespace reads as one not open.
  if (caller.has_value() && entry->spec.tenant != *caller) return NamespaceNotOpenError(ns);
  if (entry->spec.hybrid()) {
    return LookupHybridLocked(ns, *entry, keys, take_lease, lease_ttl, chooser);
  }
  std::vector<BlockRecord*> matched;
  matched.reserve(keys.size());
  index_.MatchChain(ns, keys, &matched);
  const std::string& tenant = entry->spec.tenant;
  if (take_lease && !matched.empty()) {
    if (leases_.size() >= options_.max_leases) {
      return absl::ResourceExhaustedError(
          absl::StrCat(leases_.size(), " leases are held (max_leases); release some"));
    }
    RETURN_IF_ERROR(quotas_.ChargeLease(tenant, matched.size()));
  }
  LookupResult result;
  result.matched = static_cast<uint32_t>(matched.size());
  // Filled in place: a MatchedBlock built aside and copied in costs a
  // store-forwarding stall per block (its flag bytes are read back wide).
  result.blocks.resize(matched.size());
  for (size_t i = 0; i < matched.size(); ++i) {
    BlockRecord* rec = matched[i];
    index_.Touch(rec);
    ++rec->uses;
    MatchedBlock& b = result.blocks[i];
    b.key = rec->key;
    b.size = rec->size;
    b.on_host = rec->in_host;
    b.persisted = rec->on_nvme;
  }
  counters_.lookup_keys += keys.size();
  counters_.lookup_hits += matched.size();
  if (take_lease && !matched.empty()) {
    const absl::Duration ttl =
        lease_ttl == absl::ZeroDuration() ? options_.default_lease_ttl : lease_ttl;
    for (BlockRecord* rec : matched) index_.AddLease(rec);
    result.lease_expiry = clock_->Now() + ttl;
    result.lease_id = leases_.Add(Lease{std::move(matched), result.lease_expiry, tenant, ns});
    ++counters_.leases_taken;
  }
  return result;
}

absl::StatusOr<uint32_t> BlockCache::Release(absl::string_view lease_id, absl::string_view tenant) {
  MutexLock lock(&mu_);
  ExpireLeasesLocked();
  const Lease* lease = leases_.Find(lease_id, tenant);
  if (lease == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("lease '", lease_id.substr(0, 64), "' is unknown or expired"));
  }
  const uint32_t n = static_cast<uint32_t>(lease->blocks.size());
  DropLeaseLocked(std::string(lease_id));
  return n;
}

void BlockCache::ExpireLeasesLocked() {
  for (Lease& lease : leases_.Expire(clock_->Now())) {
    quotas_.RefundLease(lease.tenant, lease.blocks.size());
    for (BlockRecord* rec : lease.blocks) {
      index_.DropLease(rec);
      host_.ReleaseIfDead(rec);
    }
    ++counters_.leases_expired;
  }
  SweepGroupsLocked();
}

void BlockCache::DropLeaseLocked(std::string id) {
  std::optional<Lease> lease = leases_.Remove(id);
  if (!lease.has_value()) return;
  quotas_.RefundLease(lease->tenant, lease->blocks.size());
  for (BlockRecord* rec : lease->blocks) {
    index_.DropLease(rec);
    host_.ReleaseIfDead(rec);
  }
  SweepGroupsLocked();
}

}  // namespace kvtier
