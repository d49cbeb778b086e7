// GpuTier: blocks kept in a GPU's memory (the daemon's device pool), so that
// a Load into a GPU region of the same device is a device-to-device copy
// instead of a trip over PCIe. The tier is inclusive: every block in it is
// also in the host or NVMe tier, which stays the source of truth. An entry is
// served only while its checksum equals the cache's current checksum for the
// block, so a block deleted and stored again with other bytes is never
// served stale.
//
// Entries are pinned while a copy reads or fills them (Entry::pin); a pinned
// slot is never evicted or reused. Reserve/Commit fill a slot: the entry is
// findable only after Commit(entry, true).
//
// The interface is storage's; the implementation (gpu/device_pool.h) owns
// the device memory.
//
// Thread-safety: implementations are thread-safe.
#ifndef KVTIER_DATAPATH_GPU_TIER_H_
#define KVTIER_DATAPATH_GPU_TIER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "storage/block_key.h"
#include "storage/namespace_spec.h"

namespace kvtier {

class GpuTier {
 public:
  struct Entry {
    uint8_t* data = nullptr;  // device address
    uint64_t size = 0;
    uint32_t slot = 0;
    std::shared_ptr<void> pin;  // held while a copy uses the slot
  };
  struct Stats {
    int device = 0;
    uint64_t capacity_bytes = 0;
    uint64_t slot_bytes = 0;
    uint64_t resident_blocks = 0;
    uint64_t resident_bytes = 0;
    uint64_t hits = 0;        // Loads served from the tier
    uint64_t promotions = 0;  // blocks copied in
    uint64_t evictions = 0;
    uint64_t stale = 0;  // entries dropped because the block's checksum changed
  };

  virtual ~GpuTier() = default;
  virtual int device() const = 0;
  // The resident entry for (ns, key) if its checksum is `checksum`, pinned.
  virtual std::optional<Entry> Find(const NamespaceId& ns, const BlockKey& key,
                                    uint64_t checksum) = 0;
  // A pinned slot for a block of `size` bytes, evicting the least recently
  // used unpinned entry if need be; nullopt when the block is too large, is
  // already resident or being filled, or every slot is pinned.
  virtual std::optional<Entry> Reserve(const NamespaceId& ns, const BlockKey& key,
                                       uint64_t checksum, uint64_t size) = 0;
  // Ends a Reserve: `copied` makes the entry findable, else frees the slot.
  virtual void Commit(const Entry& reserved, bool copied) = 0;
  virtual Stats stats() const = 0;
};

}  // namespace kvtier

#endif  // KVTIER_DATAPATH_GPU_TIER_H_
