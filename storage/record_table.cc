#include "storage/record_table.h"

#include <algorithm>
#include <utility>

// Inlined here: a tag per key of every Lookup.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvtier {

RecordTable::RecordTable(uint64_t seed, int tag_bits)
    : seed_(seed),
      tag_mask_(tag_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << std::clamp(tag_bits, 1, 63)) - 1) {}

uint64_t RecordTable::TagOf(const BlockKey& key) const {
  const absl::string_view bytes = key.bytes();
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed_) & tag_mask_;
}

size_t RecordTable::FindRun(absl::Span<const BlockKey> keys, std::vector<BlockRecord*>* out) const {
  // First the record holding each key's tag, up to the first tag not held,
  // with the table probes of the tags kAhead further on prefetched, and
  // each found record's leading bytes fetched: these finds read no record
  // and do not depend on one another, so the records' cache misses overlap.
  // Then compare the keys (the records have arrived meanwhile).
  constexpr size_t kAhead = 8;
  constexpr size_t kRing = 16;  // > kAhead, a power of two
  uint64_t tags[kRing];
  const size_t start = out->size();
  for (size_t i = 0; i < std::min(kAhead, keys.size()); ++i) {
    tags[i] = TagOf(keys[i]);
    by_tag_.prefetch(tags[i]);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i + kAhead < keys.size()) {
      uint64_t& ahead = tags[(i + kAhead) % kRing];
      ahead = TagOf(keys[i + kAhead]);
      by_tag_.prefetch(ahead);
    }
    BlockRecord* rec = FindByTag(tags[i % kRing]);
    if (rec == nullptr) break;
    __builtin_prefetch(rec);
    __builtin_prefetch(reinterpret_cast<const char*>(rec) + kBlockRecordHotBytes - 1);
    out->push_back(rec);
  }
  const size_t found = out->size() - start;
  for (size_t i = 0; i < found; ++i) {
    BlockRecord*& rec = (*out)[start + i];
    rec = Resolve(keys[i], rec);
    if (rec == nullptr) {
      out->resize(start + i);
      return i;
    }
  }
  return found;
}

BlockRecord* RecordTable::FindInSide(const BlockKey& key) const {
  if (side_.empty()) return nullptr;
  auto it = side_.find(TagOf(key));
  if (it == side_.end()) return nullptr;
  for (const auto& rec : it->second) {
    if (rec->key == key) return rec.get();
  }
  return nullptr;
}

bool RecordTable::Insert(std::unique_ptr<BlockRecord>& record) {
  const uint64_t tag = TagOf(record->key);
  // One probe finds the tag or claims its slot.
  auto [it, claimed] = by_tag_.try_emplace(tag);
  if (claimed) {
    it->second = std::move(record);
    return true;
  }
  if (Resolve(record->key, it->second.get()) != nullptr) return false;
  side_[tag].push_back(std::move(record));
  ++side_size_;
  return true;
}

std::unique_ptr<BlockRecord> RecordTable::Extract(BlockRecord* record) {
  const uint64_t tag = TagOf(record->key);
  auto it = by_tag_.find(tag);
  if (it == by_tag_.end()) return nullptr;
  auto side = side_.find(tag);
  if (it->second.get() == record) {
    std::unique_ptr<BlockRecord> owned = std::move(it->second);
    if (side == side_.end()) {
      by_tag_.erase(it);
      return owned;
    }
    // Another record of the tag takes the slot (the invariant).
    it->second = std::move(side->second.back());
    side->second.pop_back();
    --side_size_;
    if (side->second.empty()) side_.erase(side);
    return owned;
  }
  if (side == side_.end()) return nullptr;
  auto& recs = side->second;
  for (size_t i = 0; i < recs.size(); ++i) {
    if (recs[i].get() != record) continue;
    std::unique_ptr<BlockRecord> owned = std::move(recs[i]);
    recs[i] = std::move(recs.back());
    recs.pop_back();
    --side_size_;
    if (recs.empty()) side_.erase(side);
    return owned;
  }
  return nullptr;
}

}  // namespace kvtier
