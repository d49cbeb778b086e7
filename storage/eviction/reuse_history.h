// ReuseHistory: which blocks were evicted lately, in a few bytes per block.
//
// Most blocks are used once; a block used before is far likelier to be used
// again, and its next use often comes long after an LRU cache would have
// evicted it. So the history must outlive the blocks it remembers: it holds
// fingerprints of evicted blocks in two generations of Bloom filters, each
// sized when it starts for `generation_entries` fingerprints (the caller
// passes a multiple of the blocks it caches). When the current generation is
// full it becomes the old one and the oldest is forgotten, so the history
// spans between one and two generations of evictions.
//
// MaybeContains has no false negatives within that span and about 1% false
// positives (10 bits and 7 probes per fingerprint).
//
// Thread-safety: not thread-safe; the owner serializes every call.
#ifndef KVTIER_STORAGE_EVICTION_REUSE_HISTORY_H_
#define KVTIER_STORAGE_EVICTION_REUSE_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtier {

class ReuseHistory {
 public:
  // Generations never hold fewer than `min_entries` fingerprints.
  explicit ReuseHistory(size_t min_entries = 4096) : min_entries_(min_entries) {}

  // Remembers `fingerprint`. When the current generation is full it is
  // retired first and a new one sized for max(min_entries,
  // generation_entries) begins.
  void Add(uint64_t fingerprint, size_t generation_entries);

  bool MaybeContains(uint64_t fingerprint) const;

  size_t memory_bytes() const { return (current_.bits.size() + old_.bits.size()) * 8; }
  // Fingerprints added to the current generation, and its capacity.
  size_t current_entries() const { return current_.entries; }
  size_t current_capacity() const { return current_.capacity; }

 private:
  struct Generation {
    std::vector<uint64_t> bits;
    size_t entries = 0;
    size_t capacity = 0;
    void Reset(size_t capacity);
    void Set(uint64_t fingerprint);
    bool Test(uint64_t fingerprint) const;
  };

  const size_t min_entries_;
  Generation current_;
  Generation old_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_EVICTION_REUSE_HISTORY_H_
