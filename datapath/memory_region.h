// MemoryRegion: memory an engine shares with the daemon so that Save and Load
// move block bytes by copying, not through messages; and RegionTable, the
// daemon's registry of them by id. Kinds: a shared-memory file
// (SharedMemoryRegion, host memory) and CUDA IPC memory (gpu/, device memory
// of one GPU, copied through a CopyEngine). A region is one address space of
// size() bytes; a device region made of several engine tensors lays them end
// to end, and a range may not straddle two of them (Address says so).
// A region may name the engine process that owns it; RegionTable drops it
// when that process exits, so a crashed engine leaks nothing.
//
// Thread-safety: RegionTable is thread-safe. A region stays mapped while any
// caller holds the shared_ptr Find returned, so Remove never pulls memory
// from under a running copy. Callers must not assume the bytes are stable:
// the engine owns them and may write them concurrently.
#ifndef KVTIER_DATAPATH_MEMORY_REGION_H_
#define KVTIER_DATAPATH_MEMORY_REGION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/mutex.h"
#include "datapath/copy_engine.h"

namespace kvtier {

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual uint64_t size() const = 0;
  // Where the bytes live: host memory is copied by the CPU, device memory
  // (of GPU device()) through a CopyEngine.
  virtual MemoryKind kind() const { return MemoryKind::kHost; }
  virtual int device() const { return 0; }
  // The address of bytes [offset, offset + size), in the region's kind of
  // memory. INVALID_ARGUMENT when the range leaves the region or straddles
  // two of its allocations.
  virtual absl::StatusOr<uint8_t*> Address(uint64_t offset, uint64_t size) = 0;
  // For logs and errors, e.g. "shared memory /dev/shm/x (64 MiB)".
  virtual std::string Describe() const = 0;
};

// INVALID_ARGUMENT unless [offset, offset + size) lies in [0, region_size).
absl::Status CheckRegionRange(uint64_t offset, uint64_t size, uint64_t region_size);

class RegionTable {
 public:
  // shm_dir: the directory shared-memory files must be in. Each tenant may
  // hold at most tenant_max_regions of the max_regions (and
  // tenant_max_bytes of the max_bytes), so one cannot deny the others.
  RegionTable(size_t max_regions, uint64_t max_bytes, std::string shm_dir = "/dev/shm",
              size_t tenant_max_regions = SIZE_MAX, uint64_t tenant_max_bytes = UINT64_MAX)
      : max_regions_(max_regions),
        max_bytes_(max_bytes),
        tenant_max_regions_(tenant_max_regions),
        tenant_max_bytes_(tenant_max_bytes),
        shm_dir_(std::move(shm_dir)) {}

  ~RegionTable();
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  const std::string& shm_dir() const { return shm_dir_; }

  // Registers a region; RESOURCE_EXHAUSTED past max_regions or max_bytes,
  // or past the tenant's share of them.
  // With owner_pid > 0 the region lasts only as long as that process:
  // INVALID_ARGUMENT if it does not exist, and RemoveExitedOwners drops the
  // region once it has exited (the process is tracked by a pidfd, so a
  // reused pid does not keep the region alive).
  // `tenant` owns the region: Find and Remove by another tenant answer
  // NOT_FOUND, as for an id never registered.
  absl::StatusOr<std::string> Add(std::unique_ptr<MemoryRegion> region, int owner_pid = 0,
                                  absl::string_view tenant = "") ABSL_LOCKS_EXCLUDED(mu_);
  // Removes (as Remove does) every region whose owner process has exited;
  // returns how many. The daemon calls it every second.
  size_t RemoveExitedOwners() ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_FOUND for an unknown id or one of another tenant.
  absl::StatusOr<std::shared_ptr<MemoryRegion>> Find(absl::string_view id,
                                                     absl::string_view tenant = "") const
      ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_FOUND for an unknown id. A fence: new Finds fail at once, and Remove
  // returns when the Saves and Loads already holding the region are done
  // (after 30 s it stops waiting; the mapping then goes with its last user).
  absl::Status Remove(absl::string_view id, absl::string_view tenant = "") ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t max_regions_;
  const uint64_t max_bytes_;
  const size_t tenant_max_regions_;
  const uint64_t tenant_max_bytes_;
  const std::string shm_dir_;
  struct Entry {
    std::shared_ptr<MemoryRegion> region;
    int owner_pidfd = -1;  // -1: no owner process
    std::string tenant;
  };
  // Drops `entry` (taken out of the map) after its transfers finish.
  static void Retire(absl::string_view id, Entry entry);
  // Takes the entry at `it` out of the map and of the byte counts.
  Entry TakeLocked(absl::flat_hash_map<std::string, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct TenantShare {
    size_t regions = 0;
    uint64_t bytes = 0;
  };

  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> regions_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, TenantShare> shares_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_MEMORY_REGION_H_
