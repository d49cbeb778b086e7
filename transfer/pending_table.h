// PendingTable: what a daemon holds for its peers between their calls.
//  - stages: slots reserved for a peer's push (Stage), until the peer's
//    Commit or the stage's expiry;
//  - exports: blocks pinned for a peer's pull (Export), until the peer's
//    ReleaseExport or the export's expiry;
//  - quarantine: batches whose slots a push did not complete, held until a
//    time (bytes of a failed sender may still be in flight toward them).
// At most `max_pending` stages plus exports at once. Entries leave the
// table by Take* or TakeExpired and are handed back to the caller, so that
// slots and pins are let go after the caller's lock is released.
//
// Thread-safety: externally synchronized; REQUIRES: PeerTransfer's mutex
// held for every call (the table is PeerTransfer's state, guarded by its
// mutex).
#ifndef KVTIER_TRANSFER_PENDING_TABLE_H_
#define KVTIER_TRANSFER_PENDING_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "storage/block_cache.h"
#include "transfer/landing.h"

namespace kvtier {

struct StageEntry {
  Landing landing;
  absl::Time expiry;
};

struct ExportEntry {
  std::vector<BlockCache::ReadHandle> handles;
  absl::Time expiry;
};

class PendingTable {
 public:
  // What TakeExpired removed, to be destroyed outside the lock.
  struct Expired {
    std::vector<std::unique_ptr<StageEntry>> stages;
    std::vector<std::unique_ptr<ExportEntry>> exports;
    std::vector<std::unique_ptr<BlockCache::PutBatch>> released;  // out of quarantine
  };

  explicit PendingTable(uint32_t max_pending) : max_pending_(max_pending) {}
  PendingTable(const PendingTable&) = delete;
  PendingTable& operator=(const PendingTable&) = delete;

  // Stages plus exports.
  size_t size() const { return stages_.size() + exports_.size(); }
  size_t stages() const { return stages_.size(); }
  size_t exports() const { return exports_.size(); }
  size_t quarantined() const { return quarantine_.size(); }
  bool full() const { return size() >= max_pending_; }

  // Adds `entry` under `id` unless the table is full: null when added;
  // otherwise `entry` comes back, for the caller to free outside the lock.
  std::unique_ptr<StageEntry> AddStage(std::string id, std::unique_ptr<StageEntry> entry);
  std::unique_ptr<ExportEntry> AddExport(std::string id, std::unique_ptr<ExportEntry> entry);
  // Removes and returns the entry; null when `id` is unknown (or expired).
  std::unique_ptr<StageEntry> TakeStage(const std::string& id);
  std::unique_ptr<ExportEntry> TakeExport(const std::string& id);

  // Holds `batch` (and the slots it keeps) until `until`.
  void Quarantine(absl::Time until, std::unique_ptr<BlockCache::PutBatch> batch);

  // Removes the stages and exports whose expiry is at or before `now`, and
  // the quarantined batches whose time is up.
  Expired TakeExpired(absl::Time now);

  // Drops everything (stages, then exports, then quarantine), under the lock.
  void Clear();

 private:
  const uint32_t max_pending_;
  absl::flat_hash_map<std::string, std::unique_ptr<StageEntry>> stages_;
  absl::flat_hash_map<std::string, std::unique_ptr<ExportEntry>> exports_;
  std::vector<std::pair<absl::Time, std::unique_ptr<BlockCache::PutBatch>>> quarantine_;
};

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PENDING_TABLE_H_
