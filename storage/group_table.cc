#include "storage/group_table.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "spdlog/spdlog.h"
#include "storage/host_tier.h"

namespace kvtier {
namespace {

// A hybrid's groups as the sweep sees them: records in the shared index.
class IndexGroupStore final : public GroupStore {
 public:
  IndexGroupStore(PrefixIndex* index, HostTier* host, const HybridGroups& h)
      : index_(index), host_(host), h_(h) {}

  bool Holds(size_t g, const BlockKey& key) override { return At(g, key) != nullptr; }
  std::optional<BlockKey> SpineParent(const BlockKey& key) override {
    if (!h_.spine) return std::nullopt;
    return Parent(*h_.spine, key);
  }
  void SpineChildren(const BlockKey& key, std::vector<BlockKey>* out) override {
    if (!h_.spine) return;
    if (BlockRecord* rec = At(*h_.spine, key)) {
      for (BlockRecord* c : rec->children()) out->push_back(c->key);
    }
  }
  bool HasChildren(size_t g, const BlockKey& key) override {
    BlockRecord* rec = At(g, key);
    return rec != nullptr && !rec->children().empty();
  }
  std::optional<BlockKey> Parent(size_t g, const BlockKey& key) override {
    BlockRecord* rec = At(g, key);
    if (rec == nullptr || rec->parent == nullptr) return std::nullopt;
    return rec->parent->key;
  }
  bool Pinned(size_t g, const BlockKey& key) override {
    BlockRecord* rec = At(g, key);
    return rec != nullptr && rec->pinned();
  }
  void Drop(size_t g, const BlockKey& key) override {
    if (BlockRecord* rec = At(g, key)) host_->Remove(rec);
  }

 private:
  BlockRecord* At(size_t g, const BlockKey& key) const { return index_->Find(h_.storage[g], key); }

  PrefixIndex* const index_;
  HostTier* const host_;
  const HybridGroups& h_;
};

}  // namespace

uint64_t GroupTable::Open(const NamespaceId& id, const NamespaceSpec& spec) {
  auto [it, inserted] = hybrids_.try_emplace(id);
  if (!inserted) return 0;
  auto h = std::make_unique<HybridGroups>();
  h->id = id;
  h->groups = spec.groups;
  for (uint32_t g = 0; g < spec.groups.size(); ++g) {
    const LayerGroup& group = spec.groups[g];
    h->storage.push_back(NamespaceId::OfGroup(id, g));
    h->rules.push_back(GroupRule{group.kind, WindowBlocks(group, spec.layout.tokens_per_block)});
    if (group.kind == GroupKind::kFullAttention && !h->spine) h->spine = g;
    by_storage_[h->storage.back()] = {h.get(), g};
  }
  h->sweep = std::make_unique<StrandingSweep>(h->rules);
  HybridGroups* raw = h.get();
  it->second = std::move(h);
  // Blocks recovered from NVMe: every one is checked once.
  std::vector<BlockKey> held;
  for (const NamespaceId& storage : raw->storage) {
    index_->ForEachIn(storage, [&](const BlockRecord& r) { held.push_back(r.key); });
  }
  if (held.empty()) return 0;
  const uint64_t dropped = Run(raw, held, /*removed=*/false);
  if (dropped > 0) {
    spdlog::info("hybrid namespace {}: dropped {} recovered group blocks no cut can use",
                 id.ToHex(), dropped);
  }
  return dropped;
}

const HybridGroups* GroupTable::Find(const NamespaceId& id) const {
  auto it = hybrids_.find(id);
  return it == hybrids_.end() ? nullptr : it->second.get();
}

HybridMatch GroupTable::Match(const HybridGroups& h, absl::Span<const BlockKey> keys,
                              bool all_cuts) const {
  const size_t n = keys.size();
  const size_t groups = h.rules.size();
  HybridMatch m;
  m.by_key.resize(groups);
  size_t full_run = n;
  for (size_t g = 0; g < groups; ++g) {
    if (h.rules[g].kind != GroupKind::kFullAttention) continue;
    m.by_key[g].reserve(n);
    index_->MatchChain(h.storage[g], keys, &m.by_key[g]);
    full_run = std::min(full_run, m.by_key[g].size());
  }
  const size_t span = std::min(n, full_run);
  // The other groups' records by key, as the cut search finds them (it
  // probes each key at most once).
  auto holds = [&](size_t g, size_t i) {
    std::vector<BlockRecord*>& found = m.by_key[g];
    if (found.empty()) found.assign(span, nullptr);
    found[i] = index_->Find(h.storage[g], keys[i]);
    return found[i] != nullptr;
  };
  if (all_cuts) {
    m.cuts = RestorableCuts(h.rules, span, full_run, kMaxPlannedCuts, holds);
    m.cut = m.cuts.front();
  } else {
    m.cut = LongestRestorableCut(h.rules, span, full_run, holds);
  }
  return m;
}

std::vector<CutFetch> GroupTable::Fetches(const HybridGroups& h, const HybridMatch& m) const {
  // Per group, prefix sums of the bytes by tier over its records by key
  // (absent ones count 0; a restorable cut's ranges hold no absent one).
  std::vector<CutFetch> out(m.cuts.size());
  for (size_t i = 0; i < m.cuts.size(); ++i) out[i].cut = m.cuts[i];
  std::vector<uint64_t> host, nvme;
  for (size_t g = 0; g < h.rules.size(); ++g) {
    const std::vector<BlockRecord*>& recs = m.by_key[g];
    host.assign(recs.size() + 1, 0);
    nvme.assign(recs.size() + 1, 0);
    for (size_t i = 0; i < recs.size(); ++i) {
      const BlockRecord* r = recs[i];
      host[i + 1] = host[i] + (r != nullptr && r->in_host ? r->size : 0);
      nvme[i + 1] = nvme[i] + (r != nullptr && !r->in_host ? r->size : 0);
    }
    for (CutFetch& f : out) {
      const KeyRange r = LoadRange(h.rules[g], f.cut);
      if (r.size() == 0) continue;
      f.host_bytes += host[r.end] - host[r.begin];
      f.nvme_bytes += nvme[r.end] - nvme[r.begin];
    }
  }
  return out;
}

uint64_t GroupTable::AfterCommit(const NamespaceId& id, absl::Span<const BlockKey> keys) {
  auto it = hybrids_.find(id);
  if (it == hybrids_.end() || keys.empty()) return 0;
  return Run(it->second.get(), keys, /*removed=*/false);
}

void GroupTable::Forget(const NamespaceId& id) {
  auto it = hybrids_.find(id);
  if (it == hybrids_.end()) return;
  if (!it->second->pending.empty()) --pending_hybrids_;
  for (const NamespaceId& storage : it->second->storage) by_storage_.erase(storage);
  hybrids_.erase(it);
}

void GroupTable::NoteRemoved(const BlockRecord& record) {
  if (sweeping_) return;
  auto it = by_storage_.find(record.ns);
  if (it == by_storage_.end()) return;
  HybridGroups* h = it->second.first;
  if (h->pending.empty()) ++pending_hybrids_;
  h->pending.push_back(record.key);
  // A removed spine leaf's parent may now be a useless leaf: the sweep
  // needs it, and it cannot find it from the removed key.
  if (record.parent != nullptr) h->pending.push_back(record.parent->key);
}

uint64_t GroupTable::SweepPending() {
  if (pending_hybrids_ == 0) return 0;
  uint64_t dropped = 0;
  for (auto& [id, h] : hybrids_) {
    if (h->pending.empty()) continue;
    std::vector<BlockKey> keys = std::move(h->pending);
    h->pending.clear();
    --pending_hybrids_;
    dropped += Run(h.get(), keys, /*removed=*/true);
  }
  return dropped;
}

uint64_t GroupTable::Run(HybridGroups* h, absl::Span<const BlockKey> keys, bool removed) {
  IndexGroupStore store(index_, host_, *h);
  sweeping_ = true;
  SweepResult r = removed ? h->sweep->AfterRemove(&store, keys) : h->sweep->AfterAdd(&store, keys);
  sweeping_ = false;
  if (!r.pinned.empty()) {
    // Retried at the next sweep, once their pins may be gone.
    if (h->pending.empty()) ++pending_hybrids_;
    for (BlockKey& k : r.pinned) h->pending.push_back(std::move(k));
  }
  dropped_total_ += r.dropped;
  return r.dropped;
}

std::vector<GroupStranded> GroupTable::CountStranded(const HybridGroups& h) const {
  IndexGroupStore store(index_, host_, h);
  const size_t groups = h.rules.size();
  // The restorable cuts: keys on the spine, or (no spine) the keys every
  // recurrent group holds.
  std::vector<BlockKey> cuts;
  index_->ForEachIn(h.storage[h.spine.value_or(0)], [&](const BlockRecord& r) {
    if (h.sweep->Restorable(&store, r.key)) cuts.push_back(r.key);
  });
  std::vector<absl::flat_hash_set<BlockKey>> used(groups);
  for (const BlockKey& d : cuts) {
    for (size_t g = 0; g < groups; ++g) {
      switch (h.rules[g].kind) {
        case GroupKind::kRecurrent:
          used[g].insert(d);
          break;
        case GroupKind::kFullAttention:
          // The whole chain up to d, stopping where an earlier cut marked.
          for (BlockRecord* rec = index_->Find(h.storage[g], d);
               rec != nullptr && used[g].insert(rec->key).second; rec = rec->parent) {
          }
          break;
        case GroupKind::kSlidingWindow: {
          std::optional<BlockKey> at = d;
          for (uint32_t s = 0; s < h.rules[g].window_blocks && at; ++s) {
            used[g].insert(*at);
            at = store.SpineParent(*at);
          }
          break;
        }
      }
    }
  }
  std::vector<GroupStranded> out(groups);
  for (size_t g = 0; g < groups; ++g) {
    index_->ForEachIn(h.storage[g], [&](const BlockRecord& r) {
      if (used[g].contains(r.key)) return;
      ++out[g].blocks;
      out[g].bytes += r.size;
    });
  }
  return out;
}

}  // namespace kvtier
