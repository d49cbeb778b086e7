// RendezvousRing: which live member of the cluster owns a block, by
// rendezvous (highest-random-weight) hashing. Every member scores every
// (namespace, key) pair with a 64-bit hash seeded by the member's id; the
// highest score owns it. A member that joins takes only the keys it now
// scores highest on, and one that leaves gives up only its own, so a change
// of N members moves about 1/N of the keys and no key moves between two
// members that both stay.
//
// Invariant: every node that sees the same member ids computes the same
// owner for every key (the hash is XXH3, stable across processes, builds
// and machines; ties, astronomically rare, go to the smaller id).
//
// Thread-safety: immutable after construction; share it freely.
#ifndef KVTIER_CLUSTER_RENDEZVOUS_H_
#define KVTIER_CLUSTER_RENDEZVOUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"

namespace kvtier {

class RendezvousRing {
 public:
  // Duplicates and empty ids are dropped; order does not matter.
  explicit RendezvousRing(std::vector<std::string> member_ids);

  // Sorted, distinct.
  const std::vector<std::string>& members() const { return members_; }
  bool empty() const { return members_.empty(); }

  // Index into members() of the owner of `key` in `ns`; nullopt when the
  // ring is empty.
  std::optional<size_t> OwnerOf(const NamespaceId& ns, const BlockKey& key) const;
  // The owner's id, or "" when the ring is empty.
  absl::string_view OwnerIdOf(const NamespaceId& ns, const BlockKey& key) const;

  // Of `samples` synthetic keys, the fraction each member owns, in
  // members() order (about 1/N each); what an operator checks balance by.
  std::vector<double> SampleShares(int samples = 4096) const;

 private:
  std::vector<std::string> members_;
  std::vector<uint64_t> seeds_;  // XXH3 of each member's id, same order
};

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_RENDEZVOUS_H_
