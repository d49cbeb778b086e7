// ClusterTier: the other members' caches as one more tier of this one
// (docs/operations.md#cluster). A chain of blocks (a prompt's prefix and
// everything cached below it) belongs to the member the ring gives its
// root key to, so a whole chain lives on one node, as the prefix index
// needs (a block is stored only below its parent); a join or leave moves
// about 1/N of the chains.
//  - Fill: before a Lookup or Get, the part of `keys` not cached here is
//    pulled from the owner of keys[0], in one batched Pull, when the owner
//    is another live member not backing off after a failure and, for a
//    Lookup, the judge (the cost model) says fetching it over the link
//    beats recomputing it. Bounded by pull_timeout; a failure is a miss,
//    never an error of the call. The receiving side keeps only blocks that
//    match the checksum recorded at their first Put (PeerTransfer), so a
//    torn or foreign block is a miss.
//  - Offer: a chain stored here by an engine whose root another member
//    owns is pushed to that owner in the background (the queue is bounded;
//    an offer that finds it full is dropped and counted). The owner keeps
//    what its own tiers have room for. Blocks that arrive by Pull or Push
//    are not offered again.
// The owner must have the namespace open (its engines open it, or an
// operator does); otherwise the push is refused and counted.
//
// Thread-safety: thread-safe. One background thread runs the offers.
#ifndef KVTIER_CLUSTER_CLUSTER_TIER_H_
#define KVTIER_CLUSTER_CLUSTER_TIER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "cluster/membership.h"
#include "storage/block_cache.h"
#include "transfer/peer_transfer.h"

namespace kvtier {

struct ClusterTierOptions {
  absl::Duration pull_timeout = absl::Seconds(2);
  absl::Duration push_timeout = absl::Seconds(10);
  size_t max_queued_offers = 256;
  // How long an owner whose pull or push failed is not asked again.
  absl::Duration backoff = absl::Seconds(2);
  // Whether fetching `blocks` blocks (`bytes`) that follow the first
  // `first_block` cached ones, at `link_bytes_per_s` (0: not measured yet),
  // beats recomputing them. Unset: always.
  std::function<bool(const NamespaceId& ns, uint32_t first_block, uint32_t blocks, uint64_t bytes,
                     double link_bytes_per_s)>
      judge;
};

struct ClusterTierStats {
  uint64_t fills = 0;  // Lookups and Gets that asked an owner
  uint64_t pulled_blocks = 0;
  uint64_t pulled_bytes = 0;
  uint64_t pull_failures = 0;
  uint64_t pulls_declined = 0;    // the judge said recompute
  uint64_t pulls_backed_off = 0;  // the owner had just failed
  uint64_t offers = 0;            // chains pushed to their owner
  uint64_t offered_blocks = 0;    // blocks the owners took
  uint64_t offer_failures = 0;
  uint64_t offers_dropped = 0;  // the queue was full
};

class ClusterTier {
 public:
  // `cache`, `transfer` and `clock` must outlive this.
  ClusterTier(ClusterTierOptions options, BlockCache* cache, PeerTransfer* transfer, Clock* clock);
  ~ClusterTier();  // stops the offer thread; queued offers are dropped
  ClusterTier(const ClusterTier&) = delete;
  ClusterTier& operator=(const ClusterTier&) = delete;

  // The membership to route by, once the daemon has joined (it must
  // outlive this). Until then Fill and Offer do nothing.
  void Attach(const Membership* membership);

  // Pulls the missing part of `keys` (a chain, root first) from its owner;
  // `judged`: ask the judge first (a Lookup), else pull (a Get). Returns
  // the blocks pulled.
  // A pull takes at most pull_timeout and half of what is left until
  // `deadline` (the caller's own), so the call still answers in time.
  uint32_t Fill(const NamespaceId& ns, absl::Span<const BlockKey> keys, bool judged,
                absl::Time deadline = absl::InfiniteFuture());
  // Queues the chain ending at `last` (just stored here) for its owner.
  void Offer(const NamespaceId& ns, const BlockKey& last);
  // Runs queued offers until none is left (tests).
  void DrainOffersForTesting();

  ClusterTierStats Stats() const;

 private:
  struct OfferItem {
    NamespaceId ns;
    BlockKey last;
  };
  struct OwnerHealth {
    absl::Time retry_after = absl::InfinitePast();
    bool failing = false;
  };
  // The owner's address when it is another live member; "" otherwise.
  std::string RemoteOwner(const NamespaceId& ns, const BlockKey& root) const;
  // Whether `address` failed less than options_.backoff ago.
  bool BackingOff(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a failed transfer with the owner at `address`; backs off from it
  // unless the failure was this node's own (its namespace, its room).
  void Failed(const std::string& address, const absl::Status& status, const char* what)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The status that stopped a transfer after `taken` leading blocks: OK
  // when all went or the owner simply did not have the next one.
  static absl::Status Stopped(const TransferOutcome& outcome, size_t* taken);
  void Succeeded(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  void RunOffer(const OfferItem& item);
  void OfferLoop();

  const ClusterTierOptions options_;
  BlockCache* const cache_;
  PeerTransfer* const transfer_;
  Clock* const clock_;
  std::atomic<const Membership*> membership_{nullptr};

  mutable Mutex mu_;
  ClusterTierStats stats_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, OwnerHealth> owners_ ABSL_GUARDED_BY(mu_);
  std::deque<OfferItem> queue_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;  // offers taken off the queue, not yet done
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace kvtier

#endif  // KVTIER_CLUSTER_CLUSTER_TIER_H_
