// DevicePool: the GPU tier, a daemon-owned region of one GPU's memory cut
// into equal slots, each holding one block, evicted least recently used.
// Device memory comes from a DeviceAllocator: cudaMalloc in CUDA builds
// (CudaDeviceAllocator), host memory posing as a GPU's in tests.
//
// Thread-safety: thread-safe; one mutex guards the slot table. Pins keep
// the pool alive only as long as the pool itself: destroy the pool after
// every copy using it has finished.
#ifndef KVTIER_GPU_DEVICE_POOL_H_
#define KVTIER_GPU_DEVICE_POOL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "datapath/gpu_tier.h"
#include "storage/namespaced_key.h"

namespace kvtier {

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // RESOURCE_EXHAUSTED when the device has not that much free memory.
  virtual absl::StatusOr<uint8_t*> Allocate(int device, uint64_t bytes) = 0;
  virtual void Free(int device, uint8_t* p) = 0;
};

// cudaMalloc / cudaFree; FAILED_PRECONDITION without CUDA or a GPU.
std::unique_ptr<DeviceAllocator> CudaDeviceAllocator();

class DevicePool final : public GpuTier {
 public:
  // INVALID_ARGUMENT unless 0 < slot_bytes <= pool_bytes.
  static absl::StatusOr<std::unique_ptr<DevicePool>> Create(int device, uint64_t pool_bytes,
                                                            uint64_t slot_bytes,
                                                            std::unique_ptr<DeviceAllocator> alloc);
  ~DevicePool() override;

  int device() const override { return device_; }
  std::optional<Entry> Find(const NamespaceId& ns, const BlockKey& key, uint64_t checksum) override
      ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<Entry> Reserve(const NamespaceId& ns, const BlockKey& key, uint64_t checksum,
                               uint64_t size) override ABSL_LOCKS_EXCLUDED(mu_);
  void Commit(const Entry& reserved, bool copied) override ABSL_LOCKS_EXCLUDED(mu_);
  Stats stats() const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State { kFree, kFilling, kReady };
  struct Slot {
    State state = State::kFree;
    NamespaceId ns;
    BlockKey key;
    uint64_t checksum = 0;
    uint64_t size = 0;
    uint32_t pins = 0;
    uint64_t used = 0;    // LRU tick
    bool mapped = false;  // in index_ (a stale entry is unmapped, then freed)
  };
  using NsKey = NamespacedKey;

  DevicePool(int device, uint8_t* base, uint64_t slot_bytes, size_t slots,
             std::unique_ptr<DeviceAllocator> alloc);
  Entry PinLocked(uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unpin(uint32_t slot) ABSL_LOCKS_EXCLUDED(mu_);
  void FreeLocked(uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  uint8_t* const base_;
  const uint64_t slot_bytes_;
  std::unique_ptr<DeviceAllocator> alloc_;
  mutable Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<NsKey, uint32_t> index_ ABSL_GUARDED_BY(mu_);
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_GPU_DEVICE_POOL_H_
