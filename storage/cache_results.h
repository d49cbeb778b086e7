// The results of BlockCache's calls that change what it holds.
#ifndef KVTIER_STORAGE_CACHE_RESULTS_H_
#define KVTIER_STORAGE_CACHE_RESULTS_H_

#include <cstdint>
#include <vector>

#include "storage/namespace_spec.h"

namespace kvtier {

struct OpenNamespaceResult {
  NamespaceId id;
  uint64_t block_bytes = 0;  // a hybrid's: its largest group's
  bool created = false;
  // A hybrid namespace's groups, in spec order: the bytes of one block (or
  // snapshot) of each. Empty for a namespace without groups.
  std::vector<uint64_t> group_block_bytes;
};

struct PutResult {
  uint32_t blocks_stored = 0;
  uint32_t blocks_already_cached = 0;
  uint64_t bytes_stored = 0;
  // Hybrid namespaces: group blocks stored and dropped at once, no
  // restorable cut using them (e.g. attention past the last snapshot).
  uint32_t blocks_unusable = 0;
};

struct EvictResult {
  uint64_t blocks_evicted = 0;
  uint64_t bytes_freed = 0;
  uint64_t blocks_left = 0;  // still cached in scope
};

struct CloseResult {
  uint32_t leases_released = 0;
  uint64_t blocks_dropped = 0;
  uint64_t blocks_kept = 0;
};

struct DeleteResult {
  uint32_t blocks_deleted = 0;
  uint64_t bytes_freed = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_CACHE_RESULTS_H_
