// BlockCache's Lookup of a hybrid namespace: the longest cut every layer
// group can restore (storage/group_table.h), per group what to load for it,
// and a lease over exactly those blocks. Also the probes that pin nothing
// (IsHybrid, CachedPrefix, CachedChainTo).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/block_cache.h"

namespace kvtier {

absl::StatusOr<LookupResult> BlockCache::LookupHybridLocked(
    const NamespaceId& ns, const NamespaceEntry& entry, absl::Span<const BlockKey> keys,
    bool take_lease, absl::Duration lease_ttl, CutChooser* chooser) {
  const HybridGroups* h = groups_.Find(ns);
  if (h == nullptr) {  // unreachable: opening a hybrid registers its groups
    return absl::InternalError(absl::StrCat("hybrid namespace ", ns.ToHex(), " has no groups"));
  }
  HybridMatch m = groups_.Match(*h, keys, /*all_cuts=*/chooser != nullptr);
  size_t chosen = m.cut;
  if (chooser != nullptr && m.cut > 0) {
    chosen = chooser->Choose(groups_.Fetches(*h, m));
    if (std::find(m.cuts.begin(), m.cuts.end(), chosen) == m.cuts.end()) chosen = m.cut;
  }
  const size_t groups = h->rules.size();
  // Per group, what the longest cut loads and what the chosen one loads
  // besides: the lease pins both.
  std::vector<absl::Span<BlockRecord* const>> longest(groups);
  std::vector<std::vector<BlockRecord*>> extra(groups);
  size_t pinned = 0;
  for (size_t g = 0; g < groups; ++g) {
    longest[g] = m.Load(g, h->rules[g], m.cut);
    pinned += longest[g].size();
    if (chosen == m.cut || chosen == 0) continue;
    const KeyRange at_longest = LoadRange(h->rules[g], m.cut);
    const KeyRange at_chosen = LoadRange(h->rules[g], chosen);
    for (size_t i = at_chosen.begin; i < at_chosen.end; ++i) {
      if (i < at_longest.begin || i >= at_longest.end) extra[g].push_back(m.by_key[g][i]);
    }
    pinned += extra[g].size();
  }
  const bool lease = take_lease && m.cut > 0;
  if (lease) {
    if (leases_.size() >= options_.max_leases) {
      return absl::ResourceExhaustedError(
          absl::StrCat(leases_.size(), " leases are held (max_leases); release some"));
    }
    RETURN_IF_ERROR(quotas_.ChargeLease(entry.spec.tenant, pinned));
  }
  LookupResult result;
  result.matched = static_cast<uint32_t>(m.cut);
  result.chosen_cut = static_cast<uint32_t>(chosen);
  std::vector<BlockRecord*> leased;
  if (lease) leased.reserve(pinned);
  auto view = [](const BlockRecord* rec) {
    return MatchedBlock{rec->key, rec->size, rec->in_host, rec->on_nvme};
  };
  result.groups.resize(groups);
  for (size_t g = 0; g < groups; ++g) {
    GroupLoad& load = result.groups[g];
    load.group = static_cast<uint32_t>(g);
    load.first_key = static_cast<uint32_t>(LoadRange(h->rules[g], m.cut).begin);
    load.blocks.reserve(longest[g].size());
    for (BlockRecord* rec : longest[g]) {
      index_.Touch(rec);
      ++rec->uses;
      load.blocks.push_back(view(rec));
      if (lease) leased.push_back(rec);
    }
    for (BlockRecord* rec : extra[g]) {
      index_.Touch(rec);
      ++rec->uses;
      if (lease) leased.push_back(rec);
    }
  }
  if (chosen != m.cut && chosen != 0) {
    result.chosen_groups.resize(groups);
    for (size_t g = 0; g < groups; ++g) {
      GroupLoad& load = result.chosen_groups[g];
      load.group = static_cast<uint32_t>(g);
      load.first_key = static_cast<uint32_t>(LoadRange(h->rules[g], chosen).begin);
      for (const BlockRecord* rec : m.Load(g, h->rules[g], chosen))
        load.blocks.push_back(view(rec));
    }
  }
  counters_.lookup_keys += keys.size();
  counters_.lookup_hits += m.cut;
  if (lease) {
    const absl::Duration ttl =
        lease_ttl == absl::ZeroDuration() ? options_.default_lease_ttl : lease_ttl;
    for (BlockRecord* rec : leased) index_.AddLease(rec);
    result.lease_expiry = clock_->Now() + ttl;
    result.lease_id =
        leases_.Add(Lease{std::move(leased), result.lease_expiry, entry.spec.tenant, ns});
    ++counters_.leases_taken;
  }
  return result;
}

}  // namespace kvtier

namespace kvtier {

absl::StatusOr<std::vector<BlockCache::GroupRemoval>> BlockCache::PlanHybridDeleteLocked(
    const NamespaceId& ns, absl::Span<const BlockKey> keys, bool recursive) {
  const HybridGroups* h = groups_.Find(ns);
  if (h == nullptr) {
    return absl::InternalError(absl::StrCat("hybrid namespace ", ns.ToHex(), " has no groups"));
  }
  // The doomed keys: those named, and below them on each full-attention
  // chain their cached descendants (recursive) or nothing (else refused).
  absl::flat_hash_set<BlockKey> doomed_keys(keys.begin(), keys.end());
  std::vector<GroupRemoval> plan(h->storage.size());
  for (size_t g = 0; g < h->storage.size(); ++g) {
    plan[g].storage = h->storage[g];
    if (h->rules[g].kind != GroupKind::kFullAttention) continue;
    std::vector<BlockRecord*> roots;
    for (const BlockKey& key : keys) {
      if (BlockRecord* rec = index_.Find(h->storage[g], key)) roots.push_back(rec);
    }
    std::vector<BlockRecord*> doomed;
    PostOrderLocked(roots, /*may_nest=*/true, &doomed);
    for (BlockRecord* rec : doomed) {
      if (!recursive && !doomed_keys.contains(rec->key)) {
        return absl::FailedPreconditionError(
            absl::StrCat("block ", rec->parent->key.ToHex(), " has cached child ", rec->key.ToHex(),
                         " in group ", g, "; delete it too or set recursive"));
      }
      plan[g].order.push_back(rec->key);
    }
    for (BlockRecord* rec : doomed) doomed_keys.insert(rec->key);
  }
  bool any = false;
  for (size_t g = 0; g < h->storage.size(); ++g) {
    if (h->rules[g].kind != GroupKind::kFullAttention) {
      for (const BlockKey& key : doomed_keys) {
        if (index_.Find(h->storage[g], key) != nullptr) plan[g].order.push_back(key);
      }
    }
    for (const BlockKey& key : plan[g].order) {
      const BlockRecord* rec = index_.Find(h->storage[g], key);
      any = true;
      if (rec->leases > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("block ", key.ToHex(), " of group ", g, " is held by a lease"));
      }
      if (rec->refs > 0) {
        return absl::FailedPreconditionError(absl::StrCat("block ", key.ToHex(), " of group ", g,
                                                          " is being read or written; retry"));
      }
    }
  }
  for (const BlockKey& key : keys) {
    bool held = false;
    for (const NamespaceId& id : h->storage) held |= index_.Find(id, key) != nullptr;
    if (!held) return absl::NotFoundError(absl::StrCat("block ", key.ToHex(), " is not cached"));
  }
  if (!any) return absl::NotFoundError("no block named is cached");
  return plan;
}

bool BlockCache::HoldsForTesting(const NamespaceId& ns, uint32_t group, const BlockKey& key) {
  MutexLock lock(&mu_);
  const HybridGroups* h = groups_.Find(ns);
  const NamespaceId storage = h == nullptr ? ns : h->storage.at(group);
  return index_.Find(storage, key) != nullptr;
}

std::unique_ptr<BlockCache::DeferredSweep> BlockCache::DeferSweeps(const NamespaceId& ns) {
  return std::unique_ptr<DeferredSweep>(new DeferredSweep(this, ns));
}

BlockCache::DeferredSweep::~DeferredSweep() {
  MutexLock lock(&cache_->mu_);
  if (committed_.empty()) return;
  cache_->counters_.group_blocks_unusable += cache_->groups_.AfterCommit(ns_, committed_);
  cache_->SweepGroupsLocked();
}

bool BlockCache::IsHybrid(const NamespaceId& ns) {
  MutexLock lock(&mu_);
  absl::StatusOr<NamespaceEntry*> entry = namespaces_.FindOpen(ns);
  return entry.ok() && (*entry)->spec.hybrid();
}

size_t BlockCache::CachedPrefix(const NamespaceId& ns, absl::Span<const BlockKey> keys) {
  MutexLock lock(&mu_);
  absl::StatusOr<NamespaceEntry*> entry = namespaces_.FindOpen(ns);
  if (!entry.ok() || (*entry)->spec.hybrid()) return 0;
  std::vector<BlockRecord*> matched;
  return index_.MatchChain(ns, keys, &matched);
}

std::vector<BlockKey> BlockCache::CachedChainTo(const NamespaceId& ns, const BlockKey& key) {
  MutexLock lock(&mu_);
  std::vector<BlockKey> chain;
  absl::StatusOr<NamespaceEntry*> entry = namespaces_.FindOpen(ns);
  if (!entry.ok() || (*entry)->spec.hybrid()) return chain;
  for (const BlockRecord* r = index_.Find(ns, key); r != nullptr; r = r->parent) {
    chain.push_back(r->key);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace kvtier
