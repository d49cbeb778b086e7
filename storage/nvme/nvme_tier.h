// NvmeTier: the NVMe tier's devices and bookkeeping. Opens the I/O engine
// (or takes an injected one), the catalog and the slot store, registers the
// host arena with the engine when asked, keeps one WearBudget per device,
// the parsed write policy, the tier's residency counts and its health
// (degraded, last error). Recovery of the catalog at open (Recover) indexes
// what a previous run persisted, parents before children (CatalogReplay).
//
// Thread-safety: externally synchronized; REQUIRES: the owner's
// (BlockCache's) mutex held for every call, except store() and catalog()
// I/O (NvmeStore::Read/Write and Catalog::PutBatch are thread-safe), which
// the owner runs without it, and the fixed accessors (options, rule,
// ArenaBuffer, io_engine_note).
#ifndef KVTIER_STORAGE_NVME_NVME_TIER_H_
#define KVTIER_STORAGE_NVME_NVME_TIER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/clock.h"
#include "storage/cache_stats.h"
#include "storage/nvme/catalog.h"
#include "storage/nvme/io_engine.h"
#include "storage/nvme/nvme_store.h"
#include "storage/nvme/recovery.h"
#include "storage/nvme/wear_budget.h"
#include "storage/nvme/write_policy.h"
#include "storage/prefix_index.h"
#include "storage/slab_allocator.h"

namespace kvtier {

// The NVMe tier (optional). Blocks reach it by demotion (the mover copies
// cold host blocks, parents before children, so the persisted set is always
// prefix-closed) and come back by promotion on a read.
struct NvmeTierOptions {
  NvmeStoreOptions store;
  std::string catalog_dir;  // "" = <first data dir>/catalog
  IoEngineOptions io;
  // When blocks are written to NVMe: "write_back" (on demotion, under host
  // pressure), "write_through" (soon after every Put), or
  // "write_through_after_hits" (once a block has write_through_hits uses).
  // Parsed once, by NvmeTier::Open (ParseWritePolicy): INVALID_ARGUMENT at
  // BlockCache::Create for any other value.
  std::string write_policy = "write_back";
  uint32_t write_through_hits = 2;
  // Admission filter for demotion: a block is written only after this many
  // uses (its Put counts as one; each Lookup hit and Get adds one).
  uint32_t admit_min_uses = 2;
  double host_high_watermark = 0.90;  // demote above this host occupancy...
  double host_low_watermark = 0.80;   // ...until back under this
  double nvme_high_watermark = 0.95;
  double nvme_low_watermark = 0.90;
  uint32_t mover_batch = 64;  // blocks per mover write batch
  absl::Duration mover_interval = absl::Milliseconds(100);
  bool start_mover = true;  // false: tests call RunMoverOnce
  // Register the host arena with the I/O engine (io_uring fixed buffers):
  // saves per-I/O page pinning, but pins the whole arena at start.
  bool register_arena = false;
  // SSD endurance budget per device. capacity_bytes 0 = the size of the
  // filesystem holding the data directory.
  WearOptions wear;
  // Tests: use this engine (not owned; e.g. a FaultInjectingIoEngine)
  // instead of creating one from `io`.
  IoEngine* engine_for_testing = nullptr;
};

// The index record of a block recovered from its catalog entry: held on
// NVMe only, at the entry's slot. NvmeTier::Recover indexes these.
std::unique_ptr<BlockRecord> RecoveredRecord(const CatalogEntry& e);

// Runs `replay` into `index`, as NvmeTier::Recover does: room reserved from
// the catalog's counts, each entry's table slot prefetched a few entries
// ahead of `admit` (which inserts what it accepts), eviction candidates filed
// once at the end (a bulk load), unused room released. An empty replay
// touches no index (`index` may then be null).
RecoveryResult ReplayIntoIndex(CatalogReplay& replay, PrefixIndex* index,
                               absl::FunctionRef<bool(const CatalogEntry&)> admit,
                               absl::FunctionRef<void(const CatalogEntry&)> drop);

class NvmeTier {
 public:
  // Validates `options` (INVALID_ARGUMENT: a slab that cannot hold
  // max_block_bytes plus its slot header, an unknown write policy, bad
  // watermarks, no data directory) and opens the tier. A failed open leaves
  // the disk as it found it. `arena` is the host tier's memory, registered
  // with the engine when options.register_arena asks (and host slabs of
  // `host_slab_bytes` divide 1 GiB).
  static absl::StatusOr<std::unique_ptr<NvmeTier>> Open(const NvmeTierOptions& options,
                                                        uint64_t max_block_bytes,
                                                        uint64_t host_slab_bytes,
                                                        absl::Span<uint8_t> arena, Clock* clock);
  NvmeTier(const NvmeTier&) = delete;
  NvmeTier& operator=(const NvmeTier&) = delete;

  // Indexes the blocks the catalog lists (see CatalogReplay): claims each
  // one's slot and inserts its record into `index`; entries that cannot be
  // recovered are deleted from the catalog. `on_recovered` is called for
  // each block recovered (under the owner's lock, like the rest).
  absl::StatusOr<RecoveryResult> Recover(PrefixIndex* index, uint64_t max_block_bytes,
                                         absl::FunctionRef<void(const CatalogEntry&)> on_recovered);

  const NvmeTierOptions& options() const { return options_; }
  const DemotionRule& rule() const { return rule_; }
  NvmeStore& store() { return *store_; }
  Catalog& catalog() { return *catalog_; }
  WearBudget& wear(uint32_t device) { return *wear_[device]; }
  const std::string& io_engine_note() const { return io_engine_note_; }
  // The registered buffer holding a host slot, or -1 (plain buffers).
  int ArenaBuffer(const SlabAllocator::Slot& slot) const {
    return arena_buffer_ < 0 ? -1
                             : arena_buffer_ + static_cast<int>(slot.offset / kArenaBufferBytes);
  }

  // A block now on NVMe (demoted or recovered): counts it.
  void AddBlock(uint64_t bytes);
  // A block on NVMe left the cache: uncounts it and deletes its catalog
  // entry (unsynced: an entry that survives a crash is verified against its
  // slot). Its slot is freed by FreeSlot once nothing pins the record.
  void Forget(const BlockRecord& record);
  void FreeSlot(const NvmeSlot& slot) { store_->Free(slot); }

  // Health: a failed read or write degrades the tier (a read that failed
  // verification, DATA_LOSS, does not); a wholly successful write batch
  // clears it.
  void NoteReadFailure(const absl::Status& status);
  void NoteWriteFailure(absl::string_view message);
  void NoteWritesOk() { degraded_ = false; }
  const std::string& last_error() const { return last_error_; }

  // Snapshot of the tier, less what the index knows (evictions, evictable
  // blocks: the owner fills them).
  NvmeSnapshot Snapshot();
  // Endurance per device; reads each drive's SMART log (I/O).
  std::vector<DeviceWear> Wear() const;

  static constexpr uint64_t kArenaBufferBytes = uint64_t{1} << 30;  // per registered buffer

 private:
  NvmeTier(const NvmeTierOptions& options, DemotionRule rule) : options_(options), rule_(rule) {}
  absl::Status DoOpen(uint64_t host_slab_bytes, absl::Span<uint8_t> arena, Clock* clock);

  const NvmeTierOptions options_;
  const DemotionRule rule_;
  std::unique_ptr<IoEngine> io_engine_;  // null when injected
  std::unique_ptr<NvmeStore> store_;
  std::unique_ptr<Catalog> catalog_;
  std::string io_engine_note_;
  std::vector<std::unique_ptr<WearBudget>> wear_;  // one per device
  int arena_buffer_ = -1;                          // first registered buffer of the arena, or -1
  uint64_t stored_bytes_ = 0;
  uint64_t blocks_ = 0;
  bool degraded_ = false;
  std::string last_error_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_NVME_TIER_H_
