#include "gpu/device_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<DevicePool>> DevicePool::Create(
    int device, uint64_t pool_bytes, uint64_t slot_bytes, std::unique_ptr<DeviceAllocator> alloc) {
  if (slot_bytes == 0 || slot_bytes > pool_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the GPU tier needs 0 < slot (", slot_bytes,
                                                   " bytes) <= pool (", pool_bytes, " bytes)"));
  }
  const size_t slots = pool_bytes / slot_bytes;
  ASSIGN_OR_RETURN(auto* base, alloc->Allocate(device, slots * slot_bytes));
  return std::unique_ptr<DevicePool>(
      new DevicePool(device, base, slot_bytes, slots, std::move(alloc)));
}

DevicePool::DevicePool(int device, uint8_t* base, uint64_t slot_bytes, size_t slots,
                       std::unique_ptr<DeviceAllocator> alloc)
    : device_(device),
      base_(base),
      slot_bytes_(slot_bytes),
      alloc_(std::move(alloc)),
      slots_(slots) {
  stats_.device = device;
  stats_.capacity_bytes = slots * slot_bytes;
  stats_.slot_bytes = slot_bytes;
}

DevicePool::~DevicePool() { alloc_->Free(device_, base_); }

GpuTier::Entry DevicePool::PinLocked(uint32_t slot) {
  Slot& s = slots_[slot];
  ++s.pins;
  s.used = ++tick_;
  // The pin's deleter unpins; it holds no memory of its own.
  std::shared_ptr<void> pin(static_cast<void*>(base_ + uint64_t(slot) * slot_bytes_),
                            [this, slot](void*) { Unpin(slot); });
  return Entry{base_ + uint64_t(slot) * slot_bytes_, s.size, slot, std::move(pin)};
}

void DevicePool::Unpin(uint32_t slot) {
  MutexLock lock(&mu_);
  Slot& s = slots_[slot];
  --s.pins;
  // A stale entry waits for its last reader before the slot is reused; a
  // fill abandoned without Commit (its copy was cancelled) is freed.
  if (s.pins == 0 && ((s.state == State::kReady && !s.mapped) || s.state == State::kFilling)) {
    FreeLocked(slot);
  }
}

void DevicePool::FreeLocked(uint32_t slot) {
  Slot& s = slots_[slot];
  if (s.mapped) {
    index_.erase(NsKey{s.ns, s.key});
    s.mapped = false;
  }
  if (s.state == State::kReady) {
    --stats_.resident_blocks;
    stats_.resident_bytes -= s.size;
  }
  s.state = State::kFree;
}

std::optional<GpuTier::Entry> DevicePool::Find(const NamespaceId& ns, const BlockKey& key,
                                               uint64_t checksum) {
  MutexLock lock(&mu_);
  auto it = index_.find(NsKey{ns, key});
  if (it == index_.end()) return std::nullopt;
  const uint32_t slot = it->second;
  Slot& s = slots_[slot];
  if (s.state != State::kReady) return std::nullopt;  // still filling
  if (s.checksum != checksum) {
    // The block changed in the cache: never serve this copy again.
    ++stats_.stale;
    index_.erase(it);
    s.mapped = false;
    if (s.pins == 0) FreeLocked(slot);
    return std::nullopt;
  }
  ++stats_.hits;
  return PinLocked(slot);
}

std::optional<GpuTier::Entry> DevicePool::Reserve(const NamespaceId& ns, const BlockKey& key,
                                                  uint64_t checksum, uint64_t size) {
  if (size == 0 || size > slot_bytes_) return std::nullopt;
  MutexLock lock(&mu_);
  if (index_.contains(NsKey{ns, key})) return std::nullopt;
  // A free slot, else the least recently used unpinned resident one.
  int64_t pick = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.pins > 0) continue;  // a copy still uses it
    if (s.state == State::kFree) {
      pick = static_cast<int64_t>(i);
      break;
    }
    if (s.state == State::kReady && (pick < 0 || s.used < slots_[pick].used)) {
      pick = static_cast<int64_t>(i);
    }
  }
  if (pick < 0) return std::nullopt;
  const uint32_t slot = static_cast<uint32_t>(pick);
  if (slots_[slot].state == State::kReady) {
    ++stats_.evictions;
    FreeLocked(slot);
  }
  Slot& s = slots_[slot];
  s = Slot{State::kFilling, ns, key, checksum, size, 0, 0, true};
  index_[NsKey{ns, key}] = slot;
  return PinLocked(slot);
}

void DevicePool::Commit(const Entry& reserved, bool copied) {
  MutexLock lock(&mu_);
  Slot& s = slots_[reserved.slot];
  if (s.state != State::kFilling) return;
  if (copied) {
    s.state = State::kReady;
    ++stats_.promotions;
    ++stats_.resident_blocks;
    stats_.resident_bytes += s.size;
  } else {
    FreeLocked(reserved.slot);
  }
}

GpuTier::Stats DevicePool::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace kvtier
