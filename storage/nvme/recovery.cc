#include "storage/nvme/recovery.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "spdlog/spdlog.h"

namespace kvtier {

absl::StatusOr<CatalogReplay> CatalogReplay::Read(Catalog& catalog) {
  std::vector<CatalogEntry> entries;
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

RecoveryResult CatalogReplay::Run(absl::FunctionRef<bool(const CatalogEntry&)> admit,
                                  absl::FunctionRef<void(const CatalogEntry&)> drop) {
  const std::vector<CatalogEntry>& entries = entries_;
  // Each entry's parent, found once (the map is freed before indexing).
  constexpr size_t kRoot = std::numeric_limits<size_t>::max();
  constexpr size_t kOrphan = kRoot - 1;  // a parent the catalog does not hold
  std::vector<size_t> parent(entries.size(), kRoot);
  {
    using Key = std::pair<NamespaceId, BlockKey>;
    absl::flat_hash_map<Key, size_t> by_key;
    by_key.reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) by_key[{entries[i].ns, entries[i].key}] = i;
    for (size_t i = 0; i < entries.size(); ++i) {
      const CatalogEntry& e = entries[i];
      if (e.parent.empty()) continue;
      auto it = by_key.find(Key{e.ns, e.parent});
      parent[i] = it == by_key.end() ? kOrphan : it->second;
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
  std::vector<size_t> chain;  // reused: no allocation per entry
  for (size_t start = 0; start < entries.size(); ++start) {
    if (const int tenths = static_cast<int>(start * 10 / entries.size());
        show_progress && tenths > shown_tenths) {
      shown_tenths = tenths;
      spdlog::info("nvme tier: recovering [{}{}] {}% ({}/{})", std::string(tenths, '#'),
                   std::string(10 - tenths, ' '), tenths * 10, start, entries.size());
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
    for (auto i = chain.rbegin(); i != chain.rend(); ++i) {
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
  }
  return result;
}

}  // namespace kvtier
