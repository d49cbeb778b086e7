#include "storage/nvme/recovery.h"

#include <algorithm>
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
  using Key = std::pair<NamespaceId, BlockKey>;
  absl::flat_hash_map<Key, size_t> by_key;
  for (size_t i = 0; i < entries.size(); ++i) by_key[{entries[i].ns, entries[i].key}] = i;
  enum State : uint8_t { kPending, kDone, kDropped };
  std::vector<State> state(entries.size(), kPending);
  RecoveryResult result;
  result.dropped = corrupt_;
  // A large catalog takes a while: the log shows a progress bar (in tenths).
  const bool show_progress = entries.size() >= 100'000;
  int shown_tenths = 0;
  if (show_progress) {
    spdlog::info("nvme tier: indexing {} catalog entries", entries.size());
  }
  for (size_t start = 0; start < entries.size(); ++start) {
    if (const int tenths = static_cast<int>(start * 10 / entries.size());
        show_progress && tenths > shown_tenths) {
      shown_tenths = tenths;
      spdlog::info("nvme tier: recovering [{}{}] {}% ({}/{})", std::string(tenths, '#'),
                   std::string(10 - tenths, ' '), tenths * 10, start, entries.size());
    }
    // Walk up to the first ancestor that is settled, then settle downwards.
    std::vector<size_t> chain;
    size_t at = start;
    while (state[at] == kPending) {
      chain.push_back(at);
      const CatalogEntry& e = entries[at];
      if (e.parent.empty()) break;
      auto it = by_key.find(Key{e.ns, e.parent});
      if (it == by_key.end() || std::find(chain.begin(), chain.end(), it->second) != chain.end()) {
        break;
      }
      at = it->second;
    }
    for (auto i = chain.rbegin(); i != chain.rend(); ++i) {
      const CatalogEntry& e = entries[*i];
      bool ok = true;
      if (!e.parent.empty()) {
        auto it = by_key.find(Key{e.ns, e.parent});
        ok = it != by_key.end() && state[it->second] == kDone;
      }
      if (ok) ok = admit(e);
      if (!ok) {
        state[*i] = kDropped;
        ++result.dropped;
        drop(e);
        continue;
      }
      state[*i] = kDone;
      ++result.recovered;
    }
  }
  return result;
}

}  // namespace kvtier
