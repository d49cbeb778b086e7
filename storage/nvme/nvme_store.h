// NvmeStore: the slot layer of the NVMe tier. Each data directory (one per
// device) holds one preallocated file, kvtier-slots.dat (fallocate, opened
// O_DIRECT), carved by a SlabAllocator into 4 KiB-aligned slots. A slot is a
// SlotHeader (4 KiB) followed by the payload rounded up to 4 KiB, so a slot
// describes itself. Writes go through the IoEngine as one batch (payload and
// header of every block, then fdatasync of each device touched); reads
// verify the header against what the caller expects and the payload against
// its checksum, so a torn, stale or foreign slot is DATA_LOSS, never data.
//
// Payload buffers must be 4 KiB-aligned and hold RoundUpToIo(payload_bytes)
// bytes (the host arena's slots are).
//
// Thread-safety: thread-safe. Allocation state is guarded by a mutex; I/O
// runs outside it on the (thread-safe) IoEngine.
#ifndef KVTIER_STORAGE_NVME_NVME_STORE_H_
#define KVTIER_STORAGE_NVME_NVME_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/mutex.h"
#include "storage/nvme/io_engine.h"
#include "storage/nvme/slot_header.h"
#include "storage/slab_allocator.h"

namespace kvtier {

inline uint64_t RoundUpToIo(uint64_t bytes) {
  return (bytes + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
}

struct NvmeStoreOptions {
  std::vector<std::string> dirs;  // one per device
  uint64_t bytes_per_dir = uint64_t{1} << 30;
  uint64_t slab_bytes = uint64_t{64} << 20;
};

struct NvmeSlot {
  uint32_t device = 0;
  SlabAllocator::Slot slot;
};

struct NvmeWrite {
  NvmeSlot slot;
  SlotHeader header;                 // header.payload_bytes bytes of payload follow
  const uint8_t* payload = nullptr;  // aligned, RoundUpToIo(payload_bytes) readable
  int buffer = -1;                   // registered IoEngine buffer holding the payload, or -1
};

struct NvmeRead {
  NvmeSlot slot;
  SlotHeader expect;       // what the slot must hold
  uint8_t* out = nullptr;  // aligned, RoundUpToIo(payload_bytes) writable
  int buffer = -1;         // registered IoEngine buffer holding `out`, or -1
};

struct NvmeDeviceStats {
  std::string dir;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
};

class NvmeStore {
 public:
  // Creates or reopens the slot file in every directory (creating the
  // directory if needed) and preallocates it. INVALID_ARGUMENT for bad
  // geometry; UNAVAILABLE when a file cannot be opened with O_DIRECT or
  // registered; RESOURCE_EXHAUSTED when the space cannot be preallocated.
  // `engine` must outlive the store.
  static absl::StatusOr<std::unique_ptr<NvmeStore>> Open(const NvmeStoreOptions& options,
                                                         IoEngine* engine);
  ~NvmeStore();
  NvmeStore(const NvmeStore&) = delete;
  NvmeStore& operator=(const NvmeStore&) = delete;

  // A free slot for a payload of `payload_bytes`, on the device with the most
  // free space. RESOURCE_EXHAUSTED when no device has room.
  absl::StatusOr<NvmeSlot> Allocate(uint64_t payload_bytes);
  void Free(const NvmeSlot& slot);
  // Marks a slot known from the catalog as allocated (recovery), and keeps
  // sequence numbers above `sequence`.
  absl::Status Claim(const NvmeSlot& slot, uint64_t sequence);

  // Next write sequence number (monotonic, also across restarts via Claim).
  uint64_t NextSequence() { return next_sequence_.fetch_add(1); }

  // Writes every block (payload, then header) and makes them durable. One
  // status per write; a failed write leaves its slot allocated (the caller
  // frees it).
  std::vector<absl::Status> Write(absl::Span<const NvmeWrite> writes);
  // Reads and verifies every block. One status per read: DATA_LOSS when the
  // header or the payload disagrees with `expect`.
  std::vector<absl::Status> Read(absl::Span<const NvmeRead> reads);

  std::vector<NvmeDeviceStats> Stats();
  // Totals over all devices (cheap; for watermark checks).
  uint64_t capacity_bytes();
  uint64_t used_bytes();
  const IoEngine& engine() const { return *engine_; }

 private:
  struct Device {
    std::string dir;
    int fd = -1;
    int file = -1;  // IoEngine index
    std::unique_ptr<SlabAllocator> allocator;
    std::atomic<uint64_t> bytes_written{0};
    std::atomic<uint64_t> bytes_read{0};
  };

  explicit NvmeStore(IoEngine* engine) : engine_(engine) {}

  IoEngine* const engine_;
  std::vector<std::unique_ptr<Device>> devices_;  // fixed after Open
  Mutex mu_;                                      // guards every Device::allocator
  std::atomic<uint64_t> next_sequence_{1};
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_NVME_STORE_H_
