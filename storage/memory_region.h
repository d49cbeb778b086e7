// MemoryRegion: memory an engine shares with the daemon so that Save and Load
// move block bytes by copying, not through messages; and RegionTable, the
// daemon's registry of them by id. Today's kind is a shared-memory file
// (SharedMemoryRegion); CUDA IPC memory plugs in as another kind.
//
// Thread-safety: RegionTable is thread-safe. A region stays mapped while any
// caller holds the shared_ptr Find returned, so Remove never pulls memory
// from under a running copy. Callers must not assume the bytes are stable:
// the engine owns them and may write them concurrently.
#ifndef KVTIER_STORAGE_MEMORY_REGION_H_
#define KVTIER_STORAGE_MEMORY_REGION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace kvtier {

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  // The region's bytes, addressable by the daemon's CPU.
  virtual absl::Span<uint8_t> bytes() = 0;
  // For logs and errors, e.g. "shared memory /dev/shm/x (64 MiB)".
  virtual std::string Describe() const = 0;
};

class RegionTable {
 public:
  // shm_dir: the directory shared-memory files must be in.
  RegionTable(size_t max_regions, uint64_t max_bytes, std::string shm_dir = "/dev/shm")
      : max_regions_(max_regions), max_bytes_(max_bytes), shm_dir_(std::move(shm_dir)) {}

  const std::string& shm_dir() const { return shm_dir_; }

  // Registers a region; RESOURCE_EXHAUSTED past max_regions or max_bytes.
  absl::StatusOr<std::string> Add(std::unique_ptr<MemoryRegion> region) ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<std::shared_ptr<MemoryRegion>> Find(absl::string_view id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_FOUND for an unknown id. A fence: new Finds fail at once, and Remove
  // returns when the Saves and Loads already holding the region are done
  // (after 30 s it stops waiting; the mapping then goes with its last user).
  absl::Status Remove(absl::string_view id) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t max_regions_;
  const uint64_t max_bytes_;
  const std::string shm_dir_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<MemoryRegion>> regions_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_MEMORY_REGION_H_
