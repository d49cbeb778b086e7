// Test-only: chains of blocks whose bytes follow from their keys
// (KeyedBytes), stored in a BlockCache in one batch and checked byte-exact
// on reading back, as the peer and cluster tests move them between caches.
#ifndef KVTIER_TESTING_KEYED_CHAIN_H_
#define KVTIER_TESTING_KEYED_CHAIN_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "storage/block_cache.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"
#include "testing/test_bytes.h"

namespace kvtier {

// The `bytes` bytes of the block of `key`.
inline std::vector<uint8_t> KeyedBytes(const BlockKey& key, uint64_t bytes) {
  return DeterministicBytes(std::string(key.bytes()), bytes);
}

// Stores `keys` as one chain in `ns` (keys[0] a root, each next key the
// child of the one before), each block KeyedBytes(key, block_bytes).
inline absl::Status PutKeyedChain(BlockCache& cache, const NamespaceId& ns,
                                  absl::Span<const BlockKey> keys, uint64_t block_bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<BlockCache::PutBatch> batch, cache.BeginPut(ns));
  BlockKey parent;
  for (const BlockKey& k : keys) {
    RETURN_IF_ERROR(batch->StartBlock(k, parent, block_bytes));
    RETURN_IF_ERROR(batch->Append(KeyedBytes(k, block_bytes)));
    parent = k;
  }
  return batch->Commit().status();
}

// OK when `cache` reads every block of `keys` in `ns` as KeyedBytes(key,
// block_bytes); otherwise says which block differs, or why none was read.
inline absl::Status ReadsKeyedBytes(BlockCache& cache, const NamespaceId& ns,
                                    absl::Span<const BlockKey> keys, uint64_t block_bytes) {
  ASSIGN_OR_RETURN(std::vector<BlockCache::ReadHandle> handles, cache.Read(ns, keys));
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::vector<uint8_t> want = KeyedBytes(keys[i], block_bytes);
    const absl::Span<const uint8_t> got = handles[i].bytes();
    if (!std::equal(want.begin(), want.end(), got.begin(), got.end())) {
      return absl::DataLossError(absl::StrCat("block ", i, " (", keys[i].ToHex(), ") differs: ",
                                              got.size(), " bytes read, ", want.size(), " stored"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier

#endif  // KVTIER_TESTING_KEYED_CHAIN_H_
