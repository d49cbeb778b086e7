// RecordTable: the indexed BlockRecords of one namespace, owned by the table
// and found by key (PrefixIndex's per-namespace table).
//
// A slot holds a 64-bit tag of its record's key beside the record's pointer
// (16 bytes), so a probe finds a record by the tag alone, without reading
// the record. FindRun, the walk of a Lookup's keys, therefore finds every
// record first, has all of them fetched at once, and compares the keys once
// they have arrived: a key comparison inside each probe would wait for each
// record in turn, one cache miss per key that no prefetch of the table hides.
//
// Two keys may share a tag (about 2^-64 per pair: a seeded XXH3-64). The
// first record of a tag holds the tag's slot; the others wait in a side
// table under the same tag.
// Invariant: every tag of the side table is held by a slot of the main
// table, so a tag that finds no slot finds no record.
//
// Thread-safety: not thread-safe; the owner serializes every call.
#ifndef KVTIER_STORAGE_RECORD_TABLE_H_
#define KVTIER_STORAGE_RECORD_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/block_record.h"

namespace kvtier {

class RecordTable {
 public:
  // Tags are XXH3-64 of the key under `seed`, cut to their low `tag_bits`
  // bits (1..64). Fewer than 64 only in tests, to make keys share tags.
  explicit RecordTable(uint64_t seed, int tag_bits = 64);
  RecordTable(RecordTable&&) = default;
  RecordTable& operator=(RecordTable&&) = default;

  BlockRecord* Find(const BlockKey& key) const { return Resolve(key, FindByTag(TagOf(key))); }
  // Appends to `out` the records of keys[0], keys[1], ... up to the first
  // key that is not here; returns how many.
  size_t FindRun(absl::Span<const BlockKey> keys, std::vector<BlockRecord*>* out) const;

  // Starts fetching the table memory an Insert of `key` will probe.
  void PrefetchInsert(const BlockKey& key) const { by_tag_.prefetch(TagOf(key)); }
  // Takes `record` unless a record of its key is here: then returns false
  // and leaves `record` with the caller.
  bool Insert(std::unique_ptr<BlockRecord>& record);
  // Gives up `record` to the caller; null when it is not here.
  std::unique_ptr<BlockRecord> Extract(BlockRecord* record);

  size_t size() const { return by_tag_.size() + side_size_; }
  bool empty() const { return by_tag_.empty(); }
  size_t capacity() const { return by_tag_.capacity(); }
  void reserve(size_t n) { by_tag_.reserve(n); }
  // Sizes the main table for its records.
  void ShrinkToFit() { by_tag_.rehash(0); }
  // The records that do not hold their tag's slot (0 but for collisions).
  size_t side_size() const { return side_size_; }

  // fn(BlockRecord&) for each record, in no particular order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const auto& [tag, rec] : by_tag_) fn(*rec);
    for (const auto& [tag, recs] : side_) {
      for (const auto& rec : recs) fn(*rec);
    }
  }

 private:
  uint64_t TagOf(const BlockKey& key) const;
  // The record holding `tag`'s slot, found without reading any record.
  BlockRecord* FindByTag(uint64_t tag) const {
    auto it = by_tag_.find(tag);
    return it == by_tag_.end() ? nullptr : it->second.get();
  }
  // The record of `key`, given the one holding its tag's slot (or null).
  BlockRecord* Resolve(const BlockKey& key, BlockRecord* holder) const {
    if (holder == nullptr || holder->key == key) return holder;
    return FindInSide(key);
  }
  BlockRecord* FindInSide(const BlockKey& key) const;

  // A tag is already a seeded hash of its key: the tables use it as it is
  // (in tests with tag_bits < 64, only its low bits vary; correct, slower).
  struct TagHash {
    size_t operator()(uint64_t tag) const { return tag; }
  };

  uint64_t seed_;
  uint64_t tag_mask_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<BlockRecord>, TagHash> by_tag_;
  // The records whose tag's slot another record holds.
  absl::flat_hash_map<uint64_t, std::vector<std::unique_ptr<BlockRecord>>, TagHash> side_;
  size_t side_size_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_RECORD_TABLE_H_
