// SlabAllocator: hands out slots of an address range [0, capacity). The range
// is cut into equal slabs; a slab is given a size class when first needed and
// split into equal slots of that class. A slab whose slots are all free goes
// back to the free pool, so memory moves between classes as the workload
// changes. Size classes are 4 KiB-aligned: every power of two from 4 KiB up to
// the slab size, and seven steps between consecutive powers (waste < 12.5%).
//
// Thread-safety: not thread-safe; the owner serializes every call.
#ifndef KVTIER_STORAGE_SLAB_ALLOCATOR_H_
#define KVTIER_STORAGE_SLAB_ALLOCATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/statusor.h"

namespace kvtier {

class SlabAllocator {
 public:
  static constexpr uint64_t kAlignment = 4096;
  // A slot is 8 bytes, so that a BlockRecord's two (host and NVMe) take 16:
  // offsets below 2^52 (4 PiB) and at most 256 size classes, which Create
  // guarantees by its limits on capacity and slab size.
  static constexpr int kOffsetBits = 52;
  static constexpr int kClassBits = 12;
  static constexpr uint64_t kMaxCapacity = uint64_t{1} << kOffsetBits;
  static constexpr uint64_t kMaxSlabBytes = uint64_t{1} << 40;  // 225 classes
  static constexpr uint32_t kMaxClasses = 256;

  struct Slot {
    uint64_t offset : kOffsetBits = 0;
    uint64_t size_class : kClassBits = 0;
  };

  // INVALID_ARGUMENT unless slab_bytes is a positive multiple of 4 KiB of at
  // most kMaxSlabBytes and capacity holds at least one slab and is below
  // kMaxCapacity. Capacity beyond the last whole slab is not used.
  static absl::StatusOr<std::unique_ptr<SlabAllocator>> Create(uint64_t capacity,
                                                               uint64_t slab_bytes);

  // The smallest class that holds `bytes`; INVALID_ARGUMENT for 0 or for more
  // than a slab.
  absl::StatusOr<uint32_t> ClassFor(uint64_t bytes) const;
  uint64_t ClassBytes(uint32_t size_class) const { return class_bytes_[size_class]; }
  size_t num_classes() const { return class_bytes_.size(); }

  // A free slot of `size_class`, or nullopt when no slab has room and none is
  // free.
  std::optional<Slot> Allocate(uint32_t size_class);
  // Marks one specific slot as allocated, as when rebuilding the state from
  // a durable catalog. FAILED_PRECONDITION if the slot is taken or its slab
  // holds another class; INVALID_ARGUMENT if it is not a slot of this range.
  absl::Status AllocateAt(const Slot& slot);
  // Returns a slot from Allocate. Freeing a slot twice is a bug and aborts.
  void Free(const Slot& slot);

  // Slab geometry, for callers that reclaim whole slabs.
  size_t num_slabs() const { return slabs_.size(); }
  uint32_t SlabOf(uint64_t offset) const { return static_cast<uint32_t>(offset / slab_bytes_); }
  // Allocated slots in one slab (0 for a slab in the free pool).
  uint32_t SlotsInUse(uint32_t slab) const { return slabs_[slab].in_use; }

  uint64_t capacity() const { return slab_bytes_ * slabs_.size(); }
  uint64_t slab_bytes() const { return slab_bytes_; }
  // Bytes of allocated slots (class sizes, not payload sizes).
  uint64_t used_bytes() const { return used_bytes_; }
  size_t free_slabs() const { return free_slabs_.size(); }

 private:
  static_assert(sizeof(Slot) == 8, "a slot packs into 8 bytes");
  // A slab in use keeps one bit per slot (set: allocated), an eighth of a
  // byte per block where a free list and positions cost 8 bytes per slot;
  // Allocate hands out the lowest free slot, searching from the first word
  // that may hold one.
  struct Slab {
    int32_t size_class = -1;  // -1: in the free pool
    uint32_t slots = 0;       // of its class
    uint32_t in_use = 0;
    uint32_t first_open_word = 0;  // no word before it has a free slot
    std::vector<uint64_t> taken;
  };
  // Makes a free-pool slab hold `size_class`, every slot free.
  void FormatSlab(Slab& slab, uint32_t size_class);
  // Marks slot `index` of a slab in use allocated: false if it already was.
  bool Take(Slab& slab, uint32_t index);
  // Returns a slab with no slot allocated to the free pool.
  void ReleaseSlab(uint32_t slab_index);

  SlabAllocator(uint64_t slab_bytes, size_t num_slabs);

  const uint64_t slab_bytes_;
  std::vector<uint64_t> class_bytes_;
  std::vector<Slab> slabs_;
  std::vector<uint32_t> free_slabs_;
  // Per class: slabs of that class with at least one free slot.
  std::vector<std::set<uint32_t>> partial_slabs_;
  uint64_t used_bytes_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_SLAB_ALLOCATOR_H_
