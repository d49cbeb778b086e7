#include "cluster/cluster_tier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace kvtier {

ClusterTier::ClusterTier(ClusterTierOptions options, BlockCache* cache, PeerTransfer* transfer,
                         Clock* clock)
    : options_(std::move(options)), cache_(cache), transfer_(transfer), clock_(clock) {
  worker_ = std::thread([this] { OfferLoop(); });
}

ClusterTier::~ClusterTier() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  worker_.join();
}

void ClusterTier::Attach(const Membership* membership) { membership_.store(membership); }

std::string ClusterTier::RemoteOwner(const NamespaceId& ns, const BlockKey& root) const {
  const Membership* membership = membership_.load();
  if (membership == nullptr) return "";
  const std::shared_ptr<const RendezvousRing> ring = membership->Ring();
  if (ring->members().size() < 2) return "";  // alone, or local-only
  const absl::string_view owner = ring->OwnerIdOf(ns, root);
  if (owner.empty() || owner == membership->node_id()) return "";
  return membership->AddressOf(owner);
}

bool ClusterTier::BackingOff(const std::string& address) {
  MutexLock lock(&mu_);
  auto it = owners_.find(address);
  return it != owners_.end() && clock_->Now() < it->second.retry_after;
}

absl::Status ClusterTier::Stopped(const TransferOutcome& outcome, size_t* taken) {
  size_t n = 0;
  while (n < outcome.blocks.size() && outcome.blocks[n].ok()) ++n;
  *taken = n;
  if (n == outcome.blocks.size()) return absl::OkStatus();
  const absl::Status& next = outcome.blocks[n];
  return next.code() == absl::StatusCode::kNotFound ? absl::OkStatus() : next;
}

void ClusterTier::Failed(const std::string& address, const absl::Status& status, const char* what) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:           // the namespace is not open here
    case absl::StatusCode::kResourceExhausted:  // no room here
    case absl::StatusCode::kInvalidArgument:
      return;  // this node's own refusal says nothing of the owner
    default:
      break;
  }
  MutexLock lock(&mu_);
  OwnerHealth& health = owners_[address];
  if (!health.failing) {
    spdlog::warn("cluster tier: {} with owner {} failed ({}); not asking it for {}", what, address,
                 status.ToString(), absl::FormatDuration(options_.backoff));
  }
  health.failing = true;
  health.retry_after = clock_->Now() + options_.backoff;
}

void ClusterTier::Succeeded(const std::string& address) {
  MutexLock lock(&mu_);
  auto it = owners_.find(address);
  if (it == owners_.end() || !it->second.failing) return;
  spdlog::info("cluster tier: owner {} answers again", address);
  owners_.erase(it);
}

uint32_t ClusterTier::Fill(const NamespaceId& ns, absl::Span<const BlockKey> keys, bool judged,
                           absl::Time deadline) {
  if (keys.empty() || !IsReceiver(transfer_->Info().role)) return 0;
  // Alone, local-only or not joined yet: nothing to ask, and no probe of
  // the cache on the Lookup's path.
  const Membership* membership = membership_.load();
  if (membership == nullptr || membership->Ring()->members().size() < 2) return 0;
  // Chains of an open namespace without layer groups only.
  if (!cache_->NamespaceBlockBytes(ns).ok() || cache_->IsHybrid(ns)) return 0;
  const size_t cached = cache_->CachedPrefix(ns, keys);
  if (cached == keys.size()) return 0;
  // The chain's root: keys[0] itself, or its cached ancestor when the
  // caller started below the root.
  const std::vector<BlockKey> above = cache_->CachedChainTo(ns, keys[0]);
  const std::string owner = RemoteOwner(ns, above.empty() ? keys[0] : above[0]);
  if (owner.empty()) return 0;
  if (BackingOff(owner)) {
    MutexLock lock(&mu_);
    ++stats_.pulls_backed_off;
    return 0;
  }
  const absl::Span<const BlockKey> missing = keys.subspan(cached);
  if (judged && options_.judge) {
    double link = 0;
    for (const PeerStats& p : transfer_->Peers()) {
      if (p.address == owner) link = p.observed_bytes_per_second();
    }
    const uint64_t block_bytes = cache_->NamespaceBlockBytes(ns).value_or(0);
    if (!options_.judge(ns, static_cast<uint32_t>(cached), static_cast<uint32_t>(missing.size()),
                        block_bytes * missing.size(), link)) {
      MutexLock lock(&mu_);
      ++stats_.pulls_declined;
      return 0;
    }
  }
  const absl::Duration timeout = std::min(options_.pull_timeout, (deadline - clock_->Now()) / 2);
  if (timeout < absl::Milliseconds(5)) return 0;  // the caller has no time to wait
  {
    MutexLock lock(&mu_);
    ++stats_.fills;
  }
  absl::StatusOr<TransferOutcome> pulled = transfer_->Pull(ns, missing, owner, timeout);
  if (!pulled.ok()) {
    Failed(owner, pulled.status(), "pull");
    MutexLock lock(&mu_);
    ++stats_.pull_failures;
    return 0;
  }
  // The owner not having a block is a plain miss; anything else that
  // stopped the pull before any block came (unreachable, timed out) counts
  // against it. A torn block after good ones keeps the good prefix.
  size_t blocks = 0;
  const absl::Status stopped = Stopped(*pulled, &blocks);
  if (blocks == 0 && !stopped.ok()) {
    Failed(owner, stopped, "pull");
    MutexLock lock(&mu_);
    ++stats_.pull_failures;
    return 0;
  }
  Succeeded(owner);
  MutexLock lock(&mu_);
  stats_.pulled_blocks += blocks;
  stats_.pulled_bytes += pulled->bytes_moved;
  return static_cast<uint32_t>(blocks);
}

void ClusterTier::Offer(const NamespaceId& ns, const BlockKey& last) {
  if (membership_.load() == nullptr || !IsSource(transfer_->Info().role)) return;
  MutexLock lock(&mu_);
  if (queue_.size() >= options_.max_queued_offers) {
    ++stats_.offers_dropped;
    return;
  }
  queue_.push_back(OfferItem{ns, last});
}

void ClusterTier::RunOffer(const OfferItem& item) {
  const std::vector<BlockKey> chain = cache_->CachedChainTo(item.ns, item.last);
  if (chain.empty()) return;  // evicted meanwhile, or the namespace closed
  const std::string owner = RemoteOwner(item.ns, chain[0]);
  if (owner.empty() || BackingOff(owner)) return;
  absl::StatusOr<TransferOutcome> pushed =
      transfer_->Push(item.ns, chain, owner, options_.push_timeout);
  if (!pushed.ok()) {
    Failed(owner, pushed.status(), "offer");
    MutexLock lock(&mu_);
    ++stats_.offer_failures;
    return;
  }
  // Blocks the owner already had come back OK too; a refusal or an
  // unreachable owner before the first block is a failed offer.
  size_t taken = 0;
  const absl::Status stopped = Stopped(*pushed, &taken);
  if (taken == 0 && !stopped.ok()) {
    Failed(owner, stopped, "offer");
    MutexLock lock(&mu_);
    ++stats_.offer_failures;
    return;
  }
  Succeeded(owner);
  MutexLock lock(&mu_);
  ++stats_.offers;
  stats_.offered_blocks += taken;
}

void ClusterTier::OfferLoop() {
  while (true) {
    OfferItem item;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || !queue_.empty(); };
      mu_.Await(Condition(&ready));
      if (stop_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    RunOffer(item);
    MutexLock lock(&mu_);
    --running_;
  }
}

void ClusterTier::DrainOffersForTesting() {
  MutexLock lock(&mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return queue_.empty() && running_ == 0; };
  mu_.Await(Condition(&idle));
}

ClusterTierStats ClusterTier::Stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace kvtier
