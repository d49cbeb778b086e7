// BlockCache: the daemon's store of KV blocks. It owns the namespaces, the
// host tier (a HostArena carved by a SlabAllocator), the PrefixIndex of
// cached blocks and the Lookup leases, and implements the semantics of the
// KvCache API in domain types (no gRPC here).
//
// Guarantees:
//  - every read is verified against the XXH3-64 checksum taken at Put; a
//    mismatching block is a miss: it is counted, logged and dropped together
//    with its cached descendants (which could no longer be reached);
//  - blocks never match across namespaces (the index is keyed by both);
//  - a block leaves the tier only as an unpinned leaf (never-strand);
//  - every mutating call is all-or-nothing: on error nothing changed, with
//    one exception: a Put that reserved space before failing may have
//    evicted cold, unpinned leaves (at most one block, or one slab's worth).
//
// Thread-safety: thread-safe. Bytes are copied and checksummed outside the
// lock; the slots involved are pinned meanwhile. PutBatch objects are used
// by one thread at a time. All PutBatch and ReadHandle objects must be
// destroyed before the BlockCache.
#ifndef KVTIER_STORAGE_BLOCK_CACHE_H_
#define KVTIER_STORAGE_BLOCK_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/checksum.h"
#include "storage/clock.h"
#include "storage/host_arena.h"
#include "storage/namespace_spec.h"
#include "storage/prefix_index.h"
#include "storage/slab_allocator.h"

namespace kvtier {

struct BlockCacheOptions {
  uint64_t host_bytes = uint64_t{1} << 30;
  uint64_t slab_bytes = uint64_t{64} << 20;
  uint64_t max_block_bytes = uint64_t{64} << 20;
  uint32_t max_namespaces = 1024;
  uint32_t max_keys_per_request = 65536;
  uint32_t max_leases = 1 << 20;
  absl::Duration default_lease_ttl = absl::Seconds(30);
  absl::Duration max_lease_ttl = absl::Minutes(10);
};

struct OpenNamespaceResult {
  NamespaceId id;
  uint64_t block_bytes = 0;
  bool created = false;
};

struct MatchedBlock {
  BlockKey key;
  uint64_t size = 0;
};

struct LookupResult {
  std::vector<MatchedBlock> blocks;  // keys[0, blocks.size()) matched
  std::string lease_id;              // empty when no lease was taken
  absl::Time lease_expiry = absl::InfinitePast();
};

struct PutResult {
  uint32_t blocks_stored = 0;
  uint32_t blocks_already_cached = 0;
  uint64_t bytes_stored = 0;
};

struct DeleteResult {
  uint32_t blocks_deleted = 0;
  uint64_t bytes_freed = 0;
};

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
};

struct TierSnapshot {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t blocks = 0;
  uint64_t evictions = 0;
  uint64_t evictable_blocks = 0;
};

struct CacheSnapshot {
  uint32_t namespaces = 0;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  uint32_t active_leases = 0;
  uint64_t stranded_blocks = 0;
  CacheCounters counters;
  TierSnapshot host;
};

struct NamespaceSnapshot {
  NamespaceId id;
  NamespaceSpec spec;
  uint64_t block_bytes = 0;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
};

class BlockCache {
 public:
  class PutBatch;
  class ReadHandle;

  // INVALID_ARGUMENT for inconsistent options (e.g. max_block_bytes larger
  // than a slab), RESOURCE_EXHAUSTED if the arena cannot be mapped.
  static absl::StatusOr<std::unique_ptr<BlockCache>> Create(const BlockCacheOptions& options,
                                                            Clock* clock);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // Validates and registers a namespace; idempotent.
  // INVALID_ARGUMENT for a bad spec, RESOURCE_EXHAUSTED past max_namespaces.
  absl::StatusOr<OpenNamespaceResult> OpenNamespace(const NamespaceSpec& spec);

  // Longest cached prefix of `keys`. With take_lease and a non-empty match,
  // pins the matched blocks until Release or expiry (ttl 0 = default).
  // NOT_FOUND for an unknown namespace; INVALID_ARGUMENT for 0 or too many
  // keys or a ttl above the maximum; RESOURCE_EXHAUSTED past max_leases.
  absl::StatusOr<LookupResult> Lookup(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      bool take_lease, absl::Duration lease_ttl);

  // Starts an all-or-nothing batch of block writes. NOT_FOUND for an unknown
  // namespace.
  absl::StatusOr<std::unique_ptr<PutBatch>> BeginPut(const NamespaceId& ns);

  // Pins and verifies the blocks of `keys`, in order. NOT_FOUND if one is
  // not cached or fails its checksum (that block is dropped); nothing is
  // returned then.
  absl::StatusOr<std::vector<ReadHandle>> Read(const NamespaceId& ns,
                                               absl::Span<const BlockKey> keys);

  // Ends a lease; returns how many blocks it pinned. NOT_FOUND if unknown or
  // already expired.
  absl::StatusOr<uint32_t> Release(absl::string_view lease_id);

  // Removes blocks (and, if recursive, their descendants). NOT_FOUND if a
  // key is not cached; FAILED_PRECONDITION if a block is leased or in use,
  // or (without recursive) has a cached child outside `keys`.
  absl::StatusOr<DeleteResult> Delete(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      bool recursive);

  // Counters and sizes. `scan_for_stranded` also counts stranded blocks, an
  // O(blocks) self-check under the lock (always 0 unless the index is broken).
  CacheSnapshot Snapshot(bool scan_for_stranded = false);
  std::vector<NamespaceSnapshot> Namespaces();
  const BlockCacheOptions& options() const { return options_; }

  // Writable bytes of a cached block, to simulate corruption in tests.
  absl::StatusOr<absl::Span<uint8_t>> MutableBytesForTesting(const NamespaceId& ns,
                                                             const BlockKey& key);

 private:
  struct NamespaceEntry {
    NamespaceSpec spec;
    uint64_t block_bytes = 0;
    uint64_t blocks = 0;
    uint64_t bytes = 0;
  };
  struct Lease {
    std::vector<BlockRecord*> blocks;
    absl::Time expiry;
  };

  BlockCache(const BlockCacheOptions& options, Clock* clock, std::unique_ptr<HostArena> arena,
             std::unique_ptr<SlabAllocator> allocator);

  absl::Status CheckKeyCount(size_t n) const;
  absl::StatusOr<NamespaceEntry*> FindNamespaceLocked(const NamespaceId& ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLeaseLocked(std::string id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A slot for `size` bytes, evicting (boundedly) to make room.
  absl::StatusOr<SlabAllocator::Slot> AllocateLocked(uint64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<uint32_t> ReclaimableSlabLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Un-indexes a leaf and frees its slot now, or when its last pin drops.
  void RemoveLocked(BlockRecord* record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropSubtreeLocked(BlockRecord* root) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnpinLocked(BlockRecord* record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseIfDeadLocked(BlockRecord* record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unpin(BlockRecord* record) ABSL_LOCKS_EXCLUDED(mu_);
  uint8_t* SlotData(const SlabAllocator::Slot& slot) const { return arena_->data() + slot.offset; }

  const BlockCacheOptions options_;
  Clock* const clock_;
  const std::unique_ptr<HostArena> arena_;

  absl::Mutex mu_;
  const std::unique_ptr<SlabAllocator> allocator_ ABSL_PT_GUARDED_BY(mu_);
  PrefixIndex index_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<NamespaceId, NamespaceEntry> namespaces_ ABSL_GUARDED_BY(mu_);
  // Blocks removed from the index while pinned; freed at their last unpin.
  absl::flat_hash_map<BlockRecord*, std::unique_ptr<BlockRecord>> removed_pinned_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, std::string> lease_expiry_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  CacheCounters counters_ ABSL_GUARDED_BY(mu_);
  uint64_t stored_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// A verified, pinned block: its bytes stay valid and unchanged while the
// handle lives. Move-only.
class BlockCache::ReadHandle {
 public:
  ReadHandle(ReadHandle&& other) noexcept;
  ReadHandle& operator=(ReadHandle&& other) noexcept;
  ~ReadHandle();

  const BlockKey& key() const { return record_->key; }
  absl::Span<const uint8_t> bytes() const;

 private:
  friend class BlockCache;
  ReadHandle(BlockCache* cache, BlockRecord* record) : cache_(cache), record_(record) {}
  BlockCache* cache_;
  BlockRecord* record_;
};

// Collects the blocks of one Put. StartBlock names a block (and reserves its
// slot, evicting cold leaves if needed); Append adds its bytes; Commit
// indexes every block at once. After any error the batch is dead: later
// calls fail and its destruction frees what it reserved.
class BlockCache::PutBatch {
 public:
  ~PutBatch();
  PutBatch(const PutBatch&) = delete;
  PutBatch& operator=(const PutBatch&) = delete;

  const NamespaceId& ns() const { return ns_; }
  uint64_t block_bytes() const { return block_bytes_; }

  // INVALID_ARGUMENT: previous block incomplete, size 0 or above the
  // namespace's block size, key equal to parent, key repeated in the batch.
  // FAILED_PRECONDITION: parent neither cached nor earlier in the batch.
  // ALREADY_EXISTS: key cached with another parent or another size.
  // RESOURCE_EXHAUSTED: no room even after evicting every evictable block.
  absl::Status StartBlock(const BlockKey& key, const BlockKey& parent, uint64_t size);
  // INVALID_ARGUMENT if no block is open or data overruns the block.
  absl::Status Append(absl::Span<const uint8_t> data);
  // INVALID_ARGUMENT if empty or the last block is incomplete; ABORTED if a
  // concurrent change (a parent dropped, a conflicting put) breaks the batch.
  absl::StatusOr<PutResult> Commit();

 private:
  friend class BlockCache;
  struct Staged {
    BlockKey key;
    BlockKey parent;
    uint64_t size = 0;
    uint64_t filled = 0;
    std::optional<SlabAllocator::Slot> slot;  // nullopt: already cached
    uint64_t checksum = 0;
  };
  PutBatch(BlockCache* cache, const NamespaceId& ns, uint64_t block_bytes)
      : cache_(cache), ns_(ns), block_bytes_(block_bytes) {}
  absl::Status Fail(absl::Status status);
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_->mu_);

  BlockCache* const cache_;
  const NamespaceId ns_;
  const uint64_t block_bytes_;
  std::vector<Staged> staged_;
  absl::flat_hash_map<BlockKey, size_t> staged_index_;
  // Cached blocks this batch depends on (parents, already-cached keys),
  // pinned once each until the batch ends.
  std::vector<BlockRecord*> pinned_;
  Checksum64Stream hasher_;
  bool dead_ = false;
  bool done_ = false;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_BLOCK_CACHE_H_
