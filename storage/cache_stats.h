// The counters BlockCache keeps and the views it reports
// (BlockCache::Snapshot, Namespaces, TopBlocks, Wear). Plain values; the pieces of the
// cache (host tier, read path, NVMe tier, mover) update one CacheCounters
// that BlockCache owns, under its mutex.
#ifndef KVTIER_STORAGE_CACHE_STATS_H_
#define KVTIER_STORAGE_CACHE_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "storage/block_key.h"
#include "storage/namespace_spec.h"
#include "storage/nvme/nvme_store.h"
#include "storage/nvme/smart_log.h"
#include "storage/nvme/wear_budget.h"

namespace kvtier {

struct CacheCounters {
  uint64_t lookup_keys = 0;
  uint64_t lookup_hits = 0;
  uint64_t blocks_put = 0;
  uint64_t bytes_put = 0;
  uint64_t blocks_get = 0;
  uint64_t bytes_get = 0;
  uint64_t evictions = 0;
  uint64_t checksum_mismatches = 0;
  uint64_t dropped_descendants = 0;
  uint64_t blocks_deleted = 0;
  uint64_t leases_taken = 0;
  uint64_t leases_expired = 0;
  // NVMe tier.
  uint64_t host_hits = 0;   // blocks read from host memory
  uint64_t nvme_hits = 0;   // blocks read from NVMe (promoted)
  uint64_t promotions = 0;  // NVMe -> host copies
  uint64_t demotions = 0;   // host -> NVMe copies
  uint64_t bytes_host_to_nvme = 0;
  uint64_t bytes_nvme_to_host = 0;
  uint64_t host_copies_dropped = 0;  // host copies freed, block kept on NVMe
  uint64_t nvme_evictions = 0;       // blocks dropped from NVMe (their last tier)
  uint64_t admissions_refused_filter = 0;
  uint64_t admissions_refused_budget = 0;
  uint64_t admissions_refused_full = 0;
  uint64_t admissions_refused_value = 0;  // the namespace's NVMe tier value is not positive
  uint64_t nvme_write_failures = 0;
  uint64_t nvme_read_failures = 0;  // I/O errors and slots that failed verification
  uint64_t recovered_blocks = 0;
  uint64_t recovery_dropped = 0;  // catalog entries dropped at start (orphans, bad slots)
  // Hybrid namespaces: group blocks dropped because no restorable cut could
  // use them any more (invariant 9), after a Put or a removal.
  uint64_t group_blocks_unusable = 0;
};

// One group of a hybrid namespace, as an operator sees it.
struct GroupSnapshot {
  GroupKind kind = GroupKind::kFullAttention;
  NamespaceId storage_id;  // NamespaceId::OfGroup
  uint64_t block_bytes = 0;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  uint64_t evictions = 0;  // blocks the tiers evicted while it was known
  // Filled only by a scan (Namespaces(true)): blocks in host memory, on
  // NVMe (a block may be in both), and bytes no restorable cut can use
  // (always 0 unless a sweep was missed).
  uint64_t in_host_blocks = 0;
  uint64_t on_nvme_blocks = 0;
  uint64_t stranded_blocks = 0;
  uint64_t stranded_bytes = 0;
};

struct TierSnapshot {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t blocks = 0;
  uint64_t evictions = 0;
  uint64_t evictable_blocks = 0;
};

struct NvmeSnapshot {
  bool enabled = false;
  std::string io_engine;  // e.g. "io_uring, queue depth 32"
  std::string write_policy;
  bool degraded = false;  // the last NVMe I/O failed; clears on success
  std::string last_error;
  TierSnapshot tier;
  std::vector<NvmeDeviceStats> devices;
};

struct DeviceWear {
  std::string dir;
  WearOptions options;  // with the capacity actually used
  WearReport report;
  SmartHealth smart;
};

// One cached block, as an operator sees it (BlockCache::TopBlocks).
struct BlockView {
  BlockKey key;
  BlockKey parent;
  uint64_t size = 0;
  bool in_host = false;
  bool on_nvme = false;
  uint32_t uses = 0;
  uint32_t leases = 0;
  uint32_t children = 0;
};

struct CacheSnapshot {
  uint32_t namespaces = 0;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  uint32_t active_leases = 0;
  uint64_t stranded_blocks = 0;
  uint64_t stranded_bytes = 0;
  CacheCounters counters;
  TierSnapshot host;
  NvmeSnapshot nvme;
  std::string eviction_policy;          // "value" or "lru"
  uint64_t eviction_history_bytes = 0;  // the policy's own memory (its reuse history)
};

struct NamespaceSnapshot {
  NamespaceId id;
  NamespaceSpec spec;
  uint64_t block_bytes = 0;
  uint64_t blocks = 0;  // a hybrid's: over its groups
  uint64_t bytes = 0;
  std::vector<GroupSnapshot> groups;  // a hybrid's, in spec order
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_CACHE_STATS_H_
