#include "storage/nvme/recovery.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

// A (namespace, key) to look up among the entries without copying it.
struct KeyRef {
  const NamespaceId* ns;
  const BlockKey* key;
};

// Hash and equality of entry positions by their entry's (namespace, key),
// with KeyRef lookups (heterogeneous: no entry is built to find one).
struct EntryKeyHash {
  using is_transparent = void;
  const CatalogReplay::Entries* entries;
  size_t operator()(const KeyRef& k) const { return absl::HashOf(*k.ns, *k.key); }
  size_t operator()(size_t i) const {
    const CatalogEntry& e = (*entries)[i];
    return absl::HashOf(e.ns, e.key);
  }
};

struct EntryKeyEq {
  using is_transparent = void;
  const CatalogReplay::Entries* entries;
  // Catalog keys are unique, so two positions hold the same key only if
  // they are the same position.
  bool operator()(size_t a, size_t b) const { return a == b; }
  bool operator()(size_t i, const KeyRef& k) const {
    const CatalogEntry& e = (*entries)[i];
    return e.key == *k.key && e.ns == *k.ns;
  }
  bool operator()(const KeyRef& k, size_t i) const { return (*this)(i, k); }
};

}  // namespace

absl::StatusOr<CatalogReplay> CatalogReplay::Read(Catalog& catalog) {
  Entries entries;
  // Reserved from RocksDB's estimate: at 10^7 entries, growing the vector
  // by doubling copies and faults in twice its final size. Capped, so that a
  // wild estimate cannot reserve more than a few GiB.
  constexpr uint64_t kMaxReserve = uint64_t{1} << 25;
  entries.reserve(std::min(catalog.ApproximateCount(), kMaxReserve));
  uint64_t corrupt = 0;
  absl::Status scan = catalog.ForEach(
      [&](const CatalogEntry& e) {
        entries.push_back(e);
        return absl::OkStatus();
      },
      &corrupt);
  if (!scan.ok()) return scan;
  return CatalogReplay(std::move(entries), corrupt);
}

absl::flat_hash_map<NamespaceId, size_t> CatalogReplay::CountsByNamespace() const {
  absl::flat_hash_map<NamespaceId, size_t> counts;
  for (const CatalogEntry& e : entries_) ++counts[e.ns];
  return counts;
}

RecoveryResult CatalogReplay::Run(absl::FunctionRef<bool(const CatalogEntry&)> admit,
                                  absl::FunctionRef<void(const CatalogEntry&)> drop) {
  return Run(admit, drop, [](const CatalogEntry&) {});
}

RecoveryResult CatalogReplay::Run(absl::FunctionRef<bool(const CatalogEntry&)> admit,
                                  absl::FunctionRef<void(const CatalogEntry&)> drop,
                                  absl::FunctionRef<void(const CatalogEntry&)> upcoming) {
  const Entries& entries = entries_;
  // Each entry's parent, found once (the map is freed before indexing).
  constexpr size_t kRoot = std::numeric_limits<size_t>::max();
  constexpr size_t kOrphan = kRoot - 1;  // a parent the catalog does not hold
  // It and the set below are hundreds of MiB at 10^7: in huge pages too.
  std::vector<size_t, HugePageAllocator<size_t>> parent(entries.size(), kRoot);
  {
    // The set holds entry positions and reads keys from the entries: a
    // tenth of the memory of a map holding each key again, so fewer pages
    // to fault in and fewer cache misses per probe.
    const EntryKeyHash hash{&entries};
    absl::flat_hash_set<size_t, EntryKeyHash, EntryKeyEq, HugePageAllocator<size_t>> by_key(
        entries.size(), hash, EntryKeyEq{&entries});
    for (size_t i = 0; i < entries.size(); ++i) by_key.insert(i);
    for (size_t i = 0; i < entries.size(); ++i) {
      const CatalogEntry& e = entries[i];
      if (e.parent.empty()) continue;
      auto it = by_key.find(KeyRef{&e.ns, &e.parent});
      parent[i] = it == by_key.end() ? kOrphan : *it;
    }
  }
  enum State : uint8_t { kPending, kOnChain, kDone, kDropped };
  std::vector<State> state(entries.size(), kPending);
  RecoveryResult result;
  result.dropped = corrupt_;
  // A large catalog takes a while: the log shows a progress bar (in tenths).
  const bool show_progress = entries.size() >= 100'000;
  int shown_tenths = 0;
  if (show_progress) {
    spdlog::info("nvme tier: indexing {} catalog entries", entries.size());
  }
  // Walks start at leaves (entries no other entry names as its parent), so
  // a chain is admitted in one walk from its root down: each admission finds
  // its parent just indexed, in cache, instead of a random one indexed long
  // before (at 10^7 blocks in catalog order, that parent lookup was the
  // largest cost). A second pass settles what no leaf reaches: cycles.
  std::vector<bool> has_child(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (parent[i] != kRoot && parent[i] != kOrphan) has_child[parent[i]] = true;
  }
  std::vector<size_t> chain;  // reused: no allocation per entry
  auto walk_from = [&](size_t start) {
    const size_t settled = result.recovered + result.dropped - corrupt_;
    if (const int tenths = static_cast<int>(settled * 10 / entries.size());
        show_progress && tenths > shown_tenths) {
      shown_tenths = tenths;
      spdlog::info("nvme tier: recovering [{}{}] {}% ({}/{})", std::string(tenths, '#'),
                   std::string(10 - tenths, ' '), tenths * 10, settled, entries.size());
    }
    // Walk up to the first ancestor that is settled (or on this walk: a
    // cycle), then settle downwards.
    chain.clear();
    for (size_t at = start; state[at] == kPending;) {
      state[at] = kOnChain;
      chain.push_back(at);
      if (parent[at] == kRoot || parent[at] == kOrphan) break;
      at = parent[at];
    }
    // Entries are announced kLookahead places ahead of their admission,
    // enough for a cache miss to resolve meanwhile.
    constexpr size_t kLookahead = 8;
    for (size_t j = 0; j < std::min(kLookahead, chain.size()); ++j) {
      upcoming(entries[chain[chain.size() - 1 - j]]);
    }
    for (auto i = chain.rbegin(); i != chain.rend(); ++i) {
      if (const auto ahead = static_cast<size_t>(chain.rend() - i); ahead > kLookahead) {
        upcoming(entries[*(i + kLookahead)]);
      }
      const size_t p = parent[*i];
      bool ok = p == kRoot || (p != kOrphan && state[p] == kDone);
      if (ok) ok = admit(entries[*i]);
      if (!ok) {
        state[*i] = kDropped;
        ++result.dropped;
        drop(entries[*i]);
        continue;
      }
      state[*i] = kDone;
      ++result.recovered;
    }
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!has_child[i]) walk_from(i);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (state[i] == kPending) walk_from(i);
  }
  return result;
}

}  // namespace kvtier
