// LeaseTable: the Lookup leases. Owns each lease's id (random, 32 hex
// digits, unique among the live ones), the blocks it pins, its tenant and
// namespace, and the expiry order. The table does not touch the blocks: the
// owner pins them when a lease is added and unpins the blocks of every lease
// that Remove or Expire hands back.
//
// Thread-safety: externally synchronized; REQUIRES: the owner's
// (BlockCache's) mutex held for every call.
#ifndef KVTIER_STORAGE_LEASE_TABLE_H_
#define KVTIER_STORAGE_LEASE_TABLE_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/namespace_spec.h"
#include "storage/prefix_index.h"

namespace kvtier {

struct Lease {
  std::vector<BlockRecord*> blocks;
  absl::Time expiry;
  std::string tenant;  // of the namespace it was taken in
  NamespaceId ns;
};

class LeaseTable {
 public:
  LeaseTable() = default;
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // Registers `lease` under a fresh id and returns the id.
  std::string Add(Lease lease);
  // The live lease `id` if it belongs to `tenant`; nullptr otherwise (the
  // same answer for an unknown id and another tenant's).
  const Lease* Find(absl::string_view id, absl::string_view tenant) const;
  // Takes lease `id` out of the table; nullopt if unknown.
  std::optional<Lease> Remove(const std::string& id);
  // Takes out every lease whose expiry is at or before `now`, earliest first.
  std::vector<Lease> Expire(absl::Time now);
  // Ids of the leases taken in `ns`.
  std::vector<std::string> IdsIn(const NamespaceId& ns) const;

  size_t size() const { return leases_.size(); }

 private:
  absl::flat_hash_map<std::string, Lease> leases_;
  std::multimap<absl::Time, std::string> expiry_;
  absl::BitGen bitgen_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_LEASE_TABLE_H_
