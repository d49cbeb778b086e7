// BlockCache: the daemon's store of KV blocks, and the facade of the storage
// engine. It implements the semantics of the KvCache API in domain types (no
// gRPC here), owns the one mutex, and delegates to externally synchronized
// pieces (each "REQUIRES: BlockCache's mutex held"), in the split of
// leveldb's DBImpl and VersionSet:
//  - NamespaceTable (namespace_table.h): namespaces, their limits, block
//    counts and NVMe admission;
//  - LeaseTable (lease_table.h): Lookup leases, their ids and expiry;
//  - HostTier (host_tier.h): the arena and slab allocator, allocation with
//    bounded eviction, removal from every tier, and the pins that keep
//    removed records alive;
//  - ReadPath (read_path.h): Read's phases, promotion from NVMe and
//    checksum verification; ReadHandle (below) pins what it returns;
//  - PutBatch (below, put_batch.cc): staging, landings and commit of a Put;
//  - NvmeTier (nvme/nvme_tier.h): the NVMe devices, catalog, wear budgets
//    and the write policy, parsed once (nvme/write_policy.h); recovery at
//    open (CatalogReplay, nvme/recovery.h);
//  - Mover (nvme/mover.h): one mover pass; the policy's pure demotion rule
//    (DecideDemotion) decides which blocks it writes.
// BlockCache keeps the PrefixIndex, the tenant quotas, the counters and
// the transfer meters, sequences the pieces' phases around the lock (I/O,
// copies, checksums outside it), runs the mover thread. Removals: in
// block_cache_removal.cc.
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
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/checksum.h"
#include "base/clock.h"
#include "base/mutex.h"
#include "storage/block_event.h"
#include "storage/block_key.h"
#include "storage/cache_results.h"
#include "storage/cache_stats.h"
#include "storage/group_table.h"
#include "storage/host_arena.h"
#include "storage/host_tier.h"
#include "storage/lease_table.h"
#include "storage/lookup_result.h"
#include "storage/namespace_spec.h"
#include "storage/namespace_table.h"
#include "storage/nvme/io_engine.h"
#include "storage/nvme/mover.h"
#include "storage/nvme/nvme_store.h"
#include "storage/nvme/nvme_tier.h"
#include "storage/nvme/wear_budget.h"
#include "storage/prefix_index.h"
#include "storage/read_path.h"
#include "storage/slab_allocator.h"
#include "storage/tenant_quotas.h"
#include "storage/transfer_meter.h"

namespace kvtier {

// NvmeTierOptions: see storage/nvme/nvme_tier.h.

struct BlockCacheOptions {
  uint64_t host_bytes = uint64_t{1} << 30;
  uint64_t slab_bytes = uint64_t{64} << 20;
  // Advise transparent huge pages for the host arena (storage/host_arena.h).
  bool huge_pages = true;
  // Fault in the whole host arena at Create instead of page by page as
  // blocks first land (HostArena::Commit::kAtCreate).
  bool prefault_host = false;
  uint64_t max_block_bytes = uint64_t{64} << 20;
  uint32_t max_namespaces = 1024;
  uint32_t max_keys_per_request = 65536;
  uint32_t max_leases = 1 << 16;
  // Each tenant's share of the limits above and of the host tier's
  // reservable bytes; 0 = the whole (the daemon-wide limit, the tier).
  TenantLimits tenant = {.max_namespaces = 0, .max_leases = 0, .max_reserved_bytes = 0};
  absl::Duration default_lease_ttl = absl::Seconds(30);
  absl::Duration max_lease_ttl = absl::Minutes(10);
  std::optional<NvmeTierOptions> nvme;
  // Seed the tiers' transfer meters at Create with a memory-copy probe and
  // (NVMe on) an O_DIRECT write+read of probe_bytes in the first data
  // directory, charged to its wear budget.
  bool probe_tiers = false;
  uint64_t probe_bytes = uint64_t{16} << 20;
  // Which blocks the tiers reclaim first: "value" (storage/eviction/
  // value_policy.h) or "lru" (leaf-restricted LRU, the reference).
  std::string eviction_policy = "value";
};

// MatchedBlock, GroupLoad, LookupResult: see storage/lookup_result.h.
// OpenNamespaceResult, PutResult, EvictResult, CloseResult, DeleteResult:
// storage/cache_results.h. NamespaceNotOpenError: storage/namespace_table.h.

// BlockView, CacheSnapshot, NamespaceSnapshot, CacheCounters, TierSnapshot,
// NvmeSnapshot, DeviceWear, GroupSnapshot: storage/cache_stats.h.

class BlockCache {
 public:
  class PutBatch;
  class ReadHandle;
  class DeferredSweep;

  // INVALID_ARGUMENT for inconsistent options (e.g. max_block_bytes larger
  // than a slab), RESOURCE_EXHAUSTED if the arena cannot be mapped.
  static absl::StatusOr<std::unique_ptr<BlockCache>> Create(const BlockCacheOptions& options,
                                                            Clock* clock);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // Validates and registers a namespace; idempotent.
  // INVALID_ARGUMENT for a bad spec, RESOURCE_EXHAUSTED past max_namespaces
  // or past the tenant's share of them (spec.tenant).
  absl::StatusOr<OpenNamespaceResult> OpenNamespace(const NamespaceSpec& spec);
  // Closes an open namespace: it serves nothing until opened again, its
  // place in the namespace limits is freed and its leases end; with
  // drop_blocks its unpinned blocks leave every tier (children first).
  // Blocks it keeps are served again after a re-open with the same spec.
  // Puts into it that are still open fail at Commit (ABORTED). NOT_FOUND if
  // it is not open.
  absl::StatusOr<CloseResult> CloseNamespace(const NamespaceId& ns, bool drop_blocks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What `tenant` holds against its limits now.
  TenantUsage UsageOf(absl::string_view tenant) ABSL_LOCKS_EXCLUDED(mu_);

  // The host tier's memory, for registering it with copy engines (pinning
  // for GPU copies). Its contents belong to the cache.
  absl::Span<uint8_t> host_arena() const { return arena_; }
  // Whether the kernel took the arena's transparent huge page advice.
  bool host_huge_pages() const { return host_huge_pages_; }

  // Longest cached prefix of `keys`. With take_lease and a non-empty match,
  // pins the matched blocks until Release or expiry (ttl 0 = default).
  // For a hybrid namespace: the longest cut every group can restore, and
  // per group what to load for it (LookupResult::groups); the lease pins
  // exactly those blocks. A `chooser` (hybrids only; ignored otherwise)
  // picks among every restorable cut the one to plan for; a lease pins its
  // blocks too (LookupResult::chosen_groups).
  // NOT_FOUND for an unknown namespace; INVALID_ARGUMENT for 0 or too many
  // keys or a ttl above the maximum; RESOURCE_EXHAUSTED past max_leases.
  absl::StatusOr<LookupResult> Lookup(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      bool take_lease, absl::Duration lease_ttl,
                                      CutChooser* chooser = nullptr);
  // Lookup of a namespace that `tenant` owns (CheckTenant, under the same
  // lock), if the cache's lock is free now, without waiting for it: nullopt
  // (nothing done) while another call holds it. For callers on threads that
  // must not wait (the gRPC server's own).
  absl::StatusOr<std::optional<LookupResult>> TryLookup(const NamespaceId& ns,
                                                        absl::string_view tenant,
                                                        absl::Span<const BlockKey> keys,
                                                        bool take_lease, absl::Duration lease_ttl,
                                                        CutChooser* chooser = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Starts an all-or-nothing batch of block writes. NOT_FOUND for an unknown
  // namespace. A batch of a hybrid namespace may carry blocks of all its
  // groups; they commit together, and then what no cut can use is dropped.
  // `judged_with` (optional, of `ns`): see DeferredSweep; it must outlive
  // the batch.
  absl::StatusOr<std::unique_ptr<PutBatch>> BeginPut(const NamespaceId& ns,
                                                     DeferredSweep* judged_with = nullptr);

  // Judges one request's Put batches of hybrid `ns` whole (DeferredSweep).
  std::unique_ptr<DeferredSweep> DeferSweeps(const NamespaceId& ns);

  // Pins and verifies the blocks of `keys`, in order. NOT_FOUND if one is
  // not cached or fails its checksum (that block is dropped); nothing is
  // returned then. With verify = false the host copies are not checked here:
  // the caller must check every byte it uses against ReadHandle::checksum()
  // (e.g. while copying them) and call ReportChecksumMismatch on a mismatch.
  // `group`: which group's bytes of a hybrid namespace (0 otherwise).
  absl::StatusOr<std::vector<ReadHandle>> Read(const NamespaceId& ns,
                                               absl::Span<const BlockKey> keys, bool verify = true,
                                               uint32_t group = 0);

  // Largest block of an open namespace; NOT_FOUND if it is not open.
  absl::StatusOr<uint64_t> NamespaceBlockBytes(const NamespaceId& ns) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when `ns` is open and owned by `tenant` (NamespaceSpec::tenant);
  // otherwise NOT_FOUND, the same answer (code and message) whether it is
  // not open or another tenant's, so ids cannot be probed across tenants.
  absl::Status CheckTenant(const NamespaceId& ns, absl::string_view tenant)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A block read with verify = false failed its checksum: it is counted,
  // logged and dropped with its cached descendants, as Read would have.
  void ReportChecksumMismatch(const ReadHandle& handle) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends a lease; returns how many blocks it pinned. NOT_FOUND if unknown or
  // already expired.
  // `tenant` must own the namespace the lease was taken in; another
  // tenant's lease reads as unknown (NOT_FOUND).
  absl::StatusOr<uint32_t> Release(absl::string_view lease_id, absl::string_view tenant = "");

  // Removes blocks (and, if recursive, their descendants). NOT_FOUND if a
  // key is not cached; FAILED_PRECONDITION if a block is leased or in use,
  // or (without recursive) has a cached child outside `keys`; nothing is
  // removed then. O(blocks deleted): the request is checked in one short
  // hold of the lock, then blocks go children first in batches of
  // kDeleteBatch with the lock released between them. A block that a
  // concurrent call pins or extends meanwhile stays (with its ancestors);
  // the result counts what was removed.
  static constexpr size_t kDeleteBatch = 2048;
  absl::StatusOr<DeleteResult> Delete(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      bool recursive);

  // The `top` blocks of `ns` with the most uses (ties: most recently used
  // first), and how many it holds in all. NOT_FOUND for a namespace that is
  // not open. O(blocks) under the lock: an operator's view.
  absl::StatusOr<std::pair<std::vector<BlockView>, uint64_t>> TopBlocks(const NamespaceId& ns,
                                                                        size_t top)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops up to `max_blocks` unpinned blocks of `ns` (of every namespace
  // when nullopt) from every tier, children before parents; a pinned block
  // keeps its ancestors. Counted as deletions. Call again until it evicts
  // nothing. O(blocks) under the lock per call.
  EvictResult Evict(const std::optional<NamespaceId>& ns, size_t max_blocks)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Counters and sizes; `scan_for_stranded`: also stranded blocks (O(blocks)).
  CacheSnapshot Snapshot(bool scan_for_stranded = false);
  // `scan_for_stranded`: also each hybrid group's NVMe blocks and stranded
  // bytes (an O(its blocks) scan under the lock; stranded is always 0
  // unless broken).
  std::vector<NamespaceSnapshot> Namespaces(bool scan_for_stranded = false);
  const BlockCacheOptions& options() const { return options_; }

  // Endurance accounting per NVMe device (empty when off); reads SMART (I/O).
  std::vector<DeviceWear> Wear() ABSL_LOCKS_EXCLUDED(mu_);

  // One pass of the mover: demotes (or writes through) blocks to NVMe as the
  // policy asks, then brings host and NVMe occupancy under their low
  // watermarks. Returns how many blocks it wrote. The background mover calls
  // it every mover_interval.
  size_t RunMoverOnce() ABSL_LOCKS_EXCLUDED(mu_);

  // For a clean stop: runs mover passes until the policy wants nothing more
  // written (every write-through block persisted) or `deadline` passes, at
  // least one pass; the blocks written, and in `left` (if given) whether
  // blocks may still be owed to NVMe.
  size_t DrainWrites(absl::Time deadline, bool* left = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the mover may write this namespace's blocks to NVMe (the
  // planner turns it off when the NVMe tier is not worth it for the model).
  // Blocks already on NVMe stay. NOT_FOUND for an unknown namespace.
  absl::Status SetNvmeAdmission(const NamespaceId& ns, bool admit) ABSL_LOCKS_EXCLUDED(mu_);
  // What a hit on a block of `ns` is worth: the recompute seconds it saves
  // per byte (priced by the planner). The value policy keeps blocks worth
  // more longer; blocks stored from now on carry it; namespaces without one
  // count as the geometric mean of those with one. NOT_FOUND for an unknown
  // namespace; INVALID_ARGUMENT unless finite and > 0.
  absl::Status SetRetentionValue(const NamespaceId& ns, double seconds_per_byte)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sets the retention priority (0..100, see PutBatch::set_retention) of
  // the cached leading run of `keys` in `ns`; returns how many blocks it set.
  // NOT_FOUND for a namespace not open; UNIMPLEMENTED for a hybrid one.
  absl::StatusOr<size_t> SetRetention(const NamespaceId& ns, absl::Span<const BlockKey> keys,
                                      uint8_t retention) ABSL_LOCKS_EXCLUDED(mu_);
  bool nvme_enabled() const { return nvme_ != nullptr; }
  // Measured read speed: host verification passes, NVMe promotion reads.
  TransferMeter& host_meter() { return host_meter_; }
  TransferMeter& nvme_meter() { return nvme_meter_; }

  // Where every change of residency is reported from now on (storage/
  // block_event.h); null stops reporting. Not owned; must outlive the cache
  // or be unset first.
  void SetEventSink(BlockEventSink* sink) ABSL_LOCKS_EXCLUDED(mu_);
  // Reports a kStored event per block and medium it holds now into `into`,
  // then runs `then`, in one hold of the lock: a subscriber registered by
  // `then` sees every later change, and none twice. O(blocks) under the lock.
  void SnapshotInto(BlockEventSink* into, absl::FunctionRef<void()> then) ABSL_LOCKS_EXCLUDED(mu_);

  bool IsHybrid(const NamespaceId& ns) ABSL_LOCKS_EXCLUDED(mu_);  // has layer groups
  // Probes that touch, count and pin nothing (0 or empty for a hybrid or
  // unknown namespace): the length of the cached leading run of `keys`, and
  // the cached chain from its root down to `key` (root first).
  size_t CachedPrefix(const NamespaceId& ns, absl::Span<const BlockKey> keys)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<BlockKey> CachedChainTo(const NamespaceId& ns, const BlockKey& key)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `group` of `ns` holds `key` (any tier), untouched.
  bool HoldsForTesting(const NamespaceId& ns, uint32_t group, const BlockKey& key)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<absl::Span<uint8_t>> MutableBytesForTesting(  // to corrupt a block
      const NamespaceId& ns, const BlockKey& key);

 public:
  // Bytes copied and hashed at a time (fits L2 with room to spare).
  static constexpr size_t kCopyChunk = 64 * 1024;

 private:
  BlockCache(const BlockCacheOptions& options, Clock* clock, std::unique_ptr<HostArena> arena,
             std::unique_ptr<SlabAllocator> allocator, std::unique_ptr<EvictionPolicy> policy);
  void ProbeTiers();
  void MoverLoop() ABSL_LOCKS_EXCLUDED(mu_, mover_mu_);

  absl::Status CheckKeyCount(size_t n) const;
  // Lookup's argument checks, and its work under the lock (with a caller:
  // CheckTenant's check first).
  absl::Status CheckLookup(size_t keys, bool take_lease, absl::Duration lease_ttl) const;
  absl::StatusOr<LookupResult> LookupLocked(const NamespaceId& ns,
                                            std::optional<absl::string_view> caller,
                                            absl::Span<const BlockKey> keys, bool take_lease,
                                            absl::Duration lease_ttl, CutChooser* chooser)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLeaseLocked(std::string id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A host slot for `size` bytes (expiring leases first, then evicting
  // boundedly to make room: HostTier::Allocate).
  absl::StatusOr<SlabAllocator::Slot> AllocateLocked(uint64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lookup's work for a hybrid namespace (block_cache_groups.cc).
  absl::StatusOr<LookupResult> LookupHybridLocked(const NamespaceId& ns,
                                                  const NamespaceEntry& entry,
                                                  absl::Span<const BlockKey> keys, bool take_lease,
                                                  absl::Duration lease_ttl, CutChooser* chooser)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A Delete of a hybrid namespace, checked and planned (block_cache_groups.cc):
  // the keys named and (recursive) their descendants leave every group.
  struct GroupRemoval {
    NamespaceId storage;
    std::vector<BlockKey> order;  // children first
  };
  absl::StatusOr<std::vector<GroupRemoval>> PlanHybridDeleteLocked(const NamespaceId& ns,
                                                                   absl::Span<const BlockKey> keys,
                                                                   bool recursive)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the stranding sweeps that removals since the last one call for.
  void SweepGroupsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The storage id of `group` of the open namespace `entry` (`ns` itself
  // for group 0 of a namespace without groups); INVALID_ARGUMENT for a
  // group it does not have.
  static absl::StatusOr<NamespaceId> StorageOf(const NamespaceId& ns, const NamespaceEntry& entry,
                                               uint32_t group);
  void ReleaseHandlesLocked(std::vector<ReadHandle>& handles) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unpin(BlockRecord* record) ABSL_LOCKS_EXCLUDED(mu_);
  uint8_t* SlotData(const SlabAllocator::Slot& slot) const { return arena_.data() + slot.offset; }
  // Appends the subtrees of `roots`, children before parents, each block
  // once (`may_nest`: a root may lie under another). O(blocks appended).
  void PostOrderLocked(absl::Span<BlockRecord* const> roots, bool may_nest,
                       std::vector<BlockRecord*>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the blocks of `ns` named in `order` (children first) in batches
  // of kDeleteBatch, with the lock released between batches; skips blocks
  // that are gone, pinned or have children by then. With stop_if_opened it
  // stops once `ns` is open again (or gone).
  DeleteResult RemoveInBatches(const NamespaceId& ns, absl::Span<const BlockKey> order,
                               bool stop_if_opened) ABSL_LOCKS_EXCLUDED(mu_);

  const BlockCacheOptions options_;
  Clock* const clock_;
  const absl::Span<uint8_t> arena_;  // the host tier's memory, fixed
  const bool host_huge_pages_;

  Mutex mu_;
  CacheCounters counters_ ABSL_GUARDED_BY(mu_);
  const std::unique_ptr<EvictionPolicy> policy_;  // used under mu_, by index_
  PrefixIndex index_ ABSL_GUARDED_BY(mu_);
  TenantQuotas quotas_ ABSL_GUARDED_BY(mu_);
  NamespaceTable namespaces_ ABSL_GUARDED_BY(mu_);
  LeaseTable leases_ ABSL_GUARDED_BY(mu_);
  HostTier host_ ABSL_GUARDED_BY(mu_);
  GroupTable groups_ ABSL_GUARDED_BY(mu_);
  // NVMe tier (null when off) and the pieces that use it; the pointers are
  // fixed after Create. Their calls hold mu_ except the phases each header
  // names as unlocked (NVMe and catalog I/O, checksum verification).
  std::unique_ptr<NvmeTier> nvme_;
  std::unique_ptr<ReadPath> read_;
  std::unique_ptr<Mover> mover_pass_;
  TransferMeter host_meter_;
  TransferMeter nvme_meter_;

  Mutex mover_mu_;  // serializes mover passes
  // The mover sleeps on a lock of its own (the Notification's): a thread
  // awaiting mu_ would be woken by every Unlock of it (base/mutex.h), that
  // is, by every call.
  Notification stop_mover_;
  std::thread mover_;
};

// A verified, pinned block: its bytes stay valid and unchanged while the
// handle lives. Move-only.
class BlockCache::ReadHandle {
 public:
  ReadHandle(ReadHandle&& other) noexcept;
  ReadHandle& operator=(ReadHandle&& other) noexcept;
  ~ReadHandle();

  const BlockKey& key() const { return record_->key; }
  // Empty for a root. As it was when the handle was made (under the
  // cache's lock): the block may be removed while its handle pins it.
  const BlockKey& parent() const { return parent_; }
  // XXH3-64 of the block's bytes, taken when it was stored.
  uint64_t checksum() const { return record_->checksum; }
  absl::Span<const uint8_t> bytes() const;

 private:
  friend class BlockCache;
  // REQUIRES: the cache's lock held (reads the record's parent).
  ReadHandle(BlockCache* cache, BlockRecord* record)
      : cache_(cache), record_(record), parent_(record->parent_key()) {}
  BlockCache* cache_;
  BlockRecord* record_;
  BlockKey parent_;
};

// One request's Put batches of a hybrid namespace, judged whole: the batches
// begun with it (BeginPut's `judged_with`) leave what they commit unswept
// until it is destroyed, when the stranding sweep looks at all of it at
// once (one Save may commit attention blocks in one batch and the snapshot
// that makes them usable in a later one). Sweeps after removals go on
// meanwhile. Harmless for other namespaces. Destroy before the cache.
class BlockCache::DeferredSweep {
 public:
  ~DeferredSweep();
  DeferredSweep(const DeferredSweep&) = delete;
  DeferredSweep& operator=(const DeferredSweep&) = delete;

 private:
  friend class BlockCache;
  DeferredSweep(BlockCache* cache, const NamespaceId& ns) : cache_(cache), ns_(ns) {}
  BlockCache* const cache_;
  const NamespaceId ns_;
  std::vector<BlockKey> committed_;  // guarded by cache_->mu_
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
  // The largest block the namespace (any of its groups) takes.
  uint64_t block_bytes() const { return block_bytes_; }

  // INVALID_ARGUMENT: previous block incomplete, size 0 or above the
  // namespace's block size, key equal to parent, key repeated in the batch.
  // FAILED_PRECONDITION: parent neither cached nor earlier in the batch.
  // ALREADY_EXISTS: key cached with another parent or another size.
  // RESOURCE_EXHAUSTED: no room even after evicting every evictable block.
  // `group`: which group of a hybrid namespace the block belongs to (0
  // otherwise; INVALID_ARGUMENT for a group the namespace lacks). Blocks of
  // sliding-window and recurrent groups are stored without their parent.
  absl::Status StartBlock(const BlockKey& key, const BlockKey& parent, uint64_t size,
                          uint32_t group = 0);
  // INVALID_ARGUMENT if no block is open or data overruns the block.
  // `may_vanish`: memory around `data` that its owner may shrink under the
  // daemon (a client's shared-memory file); reading a vanished page fails
  // the batch with FAILED_PRECONDITION instead of raising SIGBUS.
  absl::Status Append(absl::Span<const uint8_t> data, absl::Span<const uint8_t> may_vanish = {});
  // The bytes of `pieces`, in order (a message in the slices gRPC received
  // it in), as one Append: checked whole before any piece is copied.
  absl::Status Append(absl::Span<const absl::string_view> pieces);

  // Names a block whose bytes another party writes straight into its slot
  // (a peer's remote put, or this daemon's remote get) instead of Append.
  // `checksum` is the XXH3-64 the sender recorded for the bytes. Returns the
  // slot to fill, or an empty span when the block is already cached (nothing
  // to receive). Errors as StartBlock, except that a refused block does not
  // end the batch (nothing of it was staged). A landing block is not trusted until
  // KeepVerifiedPrefix has checked it.
  absl::StatusOr<absl::Span<uint8_t>> StartLanding(const BlockKey& key, const BlockKey& parent,
                                                   uint64_t size, uint64_t checksum,
                                                   uint32_t group = 0);
  // Blocks [0, received) have landed. Verifies each landing block's bytes
  // against its checksum, in order, and keeps only the blocks before the
  // first mismatch (and before `received`): the rest leave the batch. Their
  // slots stay reserved until the batch is destroyed (not at Commit), since
  // a sender that failed may still have bytes in flight toward them.
  // Returns how many blocks remain (0: nothing to commit). Commit refuses a
  // batch with a landing block that was not verified here.
  size_t KeepVerifiedPrefix(size_t received);
  // Names a block whose bytes the caller copies into the returned slot
  // itself (possibly on another thread, concurrently with other slots of
  // the batch), hashing what it wrote; Filled(i, checksum) then completes
  // the batch's i-th block. An empty span: already cached (Filled still
  // required). Errors as StartBlock. Commit refuses an unfilled block.
  absl::StatusOr<absl::Span<uint8_t>> StartFill(const BlockKey& key, const BlockKey& parent,
                                                uint64_t size, uint32_t group = 0);
  // INVALID_ARGUMENT (and the batch ends) unless block i was started by
  // StartFill and not filled yet.
  absl::Status Filled(size_t i, uint64_t checksum);
  size_t blocks() const { return staged_.size(); }
  // The engine's retention priority for the blocks this batch stores
  // (0..100, as EvictionPolicy's; larger values count as 100). Without one,
  // blocks get kDefaultRetention, except a partial last block (the batch's
  // last, shorter than its parent, not hybrid), which gets 0: reclaimed
  // first and never written to NVMe, since such a block is almost never
  // reused.
  void set_retention(std::optional<uint8_t> retention) { retention_ = retention; }
  // Slots of blocks KeepVerifiedPrefix dropped, freed with the batch.
  size_t held_slots() const { return held_.size(); }
  // INVALID_ARGUMENT if empty or the last block is incomplete; ABORTED if a
  // concurrent change (a parent dropped, a conflicting put) breaks the batch.
  absl::StatusOr<PutResult> Commit();

 private:
  friend class BlockCache;
  // Where a group's blocks go: its storage id, block size, and whether its
  // blocks chain to their parents (full attention) or stand alone.
  struct Target {
    NamespaceId storage;
    uint64_t block_bytes = 0;
    bool chained = true;
  };
  struct Staged {
    uint32_t group = 0;
    BlockKey key;
    BlockKey parent;
    uint64_t size = 0;
    uint64_t filled = 0;
    std::optional<SlabAllocator::Slot> slot;  // nullopt: already cached
    uint64_t checksum = 0;
    bool landing = false;   // filled by StartLanding's caller, not Append
    bool verified = false;  // landing: checked by KeepVerifiedPrefix
    bool filling = false;   // StartFill: filled by its caller, then Filled
  };
  PutBatch(BlockCache* cache, const NamespaceId& ns, uint64_t block_bytes, std::string tenant,
           std::vector<Target> targets, bool hybrid, DeferredSweep* judged_with)
      : cache_(cache),
        ns_(ns),
        block_bytes_(block_bytes),
        tenant_(std::move(tenant)),
        targets_(std::move(targets)),
        hybrid_(hybrid),
        judged_with_(judged_with) {}
  absl::Status Fail(absl::Status status);
  // Append's checks for `bytes` more of the open block (failing the batch).
  absl::Status CheckAppend(uint64_t bytes);
  // StartBlock's work, without ending the batch on error.
  absl::Status Reserve(const BlockKey& key, const BlockKey& parent, uint64_t size, uint32_t group);
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_->mu_);

  BlockCache* const cache_;
  const NamespaceId ns_;
  const uint64_t block_bytes_;
  const std::string tenant_;           // charged for the slots this batch reserves
  const std::vector<Target> targets_;  // per group; one for a namespace without
  const bool hybrid_;
  // The first full-attention group, whose chain the others follow.
  const uint32_t spine_ = [this] {
    for (uint32_t g = 0; g < targets_.size(); ++g) {
      if (targets_[g].chained) return g;
    }
    return uint32_t{0};
  }();
  DeferredSweep* const judged_with_;  // may be null
  uint64_t reserved_bytes_ = 0;       // charged to tenant_ until the batch ends
  std::vector<Staged> staged_;
  absl::flat_hash_map<std::pair<uint32_t, BlockKey>, size_t> staged_index_;  // (group, key)
  // Cached blocks this batch depends on (parents, already-cached keys),
  // pinned once each until the batch ends.
  std::vector<BlockRecord*> pinned_;
  std::vector<SlabAllocator::Slot> held_;  // see held_slots()
  Checksum64Stream hasher_;
  std::optional<uint8_t> retention_;
  bool dead_ = false;
  bool done_ = false;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_BLOCK_CACHE_H_
