#include "storage/slab_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

}  // namespace

absl::StatusOr<std::unique_ptr<SlabAllocator>> SlabAllocator::Create(uint64_t capacity,
                                                                     uint64_t slab_bytes) {
  if (slab_bytes == 0 || slab_bytes % kAlignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("slab size ", slab_bytes, " is not a positive multiple of 4096"));
  }
  if (slab_bytes > kMaxSlabBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("slab size ", slab_bytes, " exceeds the largest, ", kMaxSlabBytes));
  }
  if (capacity < slab_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("capacity ", capacity, " is smaller than one slab (", slab_bytes, " bytes)"));
  }
  if (capacity >= kMaxCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("capacity ", capacity, " is not below the largest, ", kMaxCapacity));
  }
  auto allocator =
      std::unique_ptr<SlabAllocator>(new SlabAllocator(slab_bytes, capacity / slab_bytes));
  if (allocator->num_classes() > kMaxClasses) {
    return absl::InternalError(absl::StrCat(allocator->num_classes(), " size classes"));
  }
  return allocator;
}

SlabAllocator::SlabAllocator(uint64_t slab_bytes, size_t num_slabs)
    : slab_bytes_(slab_bytes), slabs_(num_slabs) {
  for (uint64_t pow = kAlignment; pow <= slab_bytes; pow *= 2) {
    for (uint64_t step = 0; step < 8; ++step) {
      uint64_t size = RoundUp(pow + pow / 8 * step, kAlignment);
      if (size > slab_bytes) break;
      if (class_bytes_.empty() || class_bytes_.back() < size) class_bytes_.push_back(size);
    }
  }
  if (class_bytes_.back() < slab_bytes) class_bytes_.push_back(slab_bytes);
  partial_slabs_.resize(class_bytes_.size());
  free_slabs_.reserve(num_slabs);
  for (size_t i = num_slabs; i > 0; --i) free_slabs_.push_back(static_cast<uint32_t>(i - 1));
}

void SlabAllocator::FormatSlab(Slab& slab, uint32_t size_class) {
  const uint32_t slots = static_cast<uint32_t>(slab_bytes_ / class_bytes_[size_class]);
  slab.size_class = static_cast<int32_t>(size_class);
  slab.slots = slots;
  slab.in_use = 0;
  slab.first_open_word = 0;
  // Bits past the last slot stay clear: while in_use < slots, a search from
  // the lowest word finds a real free slot before them.
  slab.taken.assign((slots + 63) / 64, 0);
}

bool SlabAllocator::Take(Slab& slab, uint32_t index) {
  const uint64_t bit = uint64_t{1} << (index % 64);
  uint64_t& word = slab.taken[index / 64];
  if ((word & bit) != 0) return false;
  word |= bit;
  ++slab.in_use;
  return true;
}

void SlabAllocator::ReleaseSlab(uint32_t slab_index) {
  Slab& slab = slabs_[slab_index];
  partial_slabs_[slab.size_class].erase(slab_index);
  slab.size_class = -1;
  slab.slots = 0;
  std::vector<uint64_t>().swap(slab.taken);  // a free slab holds no memory
  free_slabs_.push_back(slab_index);
}

absl::StatusOr<uint32_t> SlabAllocator::ClassFor(uint64_t bytes) const {
  if (bytes == 0 || bytes > slab_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate ", bytes, " bytes; the slab size is ", slab_bytes_));
  }
  auto it = std::lower_bound(class_bytes_.begin(), class_bytes_.end(), bytes);
  return static_cast<uint32_t>(it - class_bytes_.begin());
}

std::optional<SlabAllocator::Slot> SlabAllocator::Allocate(uint32_t size_class) {
  std::set<uint32_t>& partial = partial_slabs_[size_class];
  uint32_t slab_index;
  if (!partial.empty()) {
    slab_index = *partial.begin();
  } else if (!free_slabs_.empty()) {
    slab_index = free_slabs_.back();
    free_slabs_.pop_back();
    FormatSlab(slabs_[slab_index], size_class);
    partial.insert(slab_index);
  } else {
    return std::nullopt;
  }
  Slab& slab = slabs_[slab_index];
  // A partial slab has a free slot at or after first_open_word.
  uint32_t w = slab.first_open_word;
  while (w < slab.taken.size() && slab.taken[w] == ~uint64_t{0}) ++w;
  if (w == slab.taken.size()) {
    std::fprintf(stderr, "SlabAllocator: slab %u is filed as partial but has no free slot\n",
                 slab_index);
    std::abort();
  }
  slab.first_open_word = w;
  const uint32_t slot = w * 64 + static_cast<uint32_t>(std::countr_one(slab.taken[w]));
  Take(slab, slot);
  if (slab.in_use == slab.slots) partial.erase(slab_index);
  used_bytes_ += class_bytes_[size_class];
  return Slot{slab_index * slab_bytes_ + slot * class_bytes_[size_class], size_class};
}

absl::Status SlabAllocator::AllocateAt(const Slot& slot) {
  const uint32_t slab_index = SlabOf(slot.offset);
  if (slab_index >= slabs_.size() || slot.size_class >= class_bytes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("slot at offset ", slot.offset, " class ",
                                                   slot.size_class, " is out of range"));
  }
  const uint64_t cls_bytes = class_bytes_[slot.size_class];
  const uint64_t in_slab = slot.offset % slab_bytes_;
  const uint32_t index = static_cast<uint32_t>(in_slab / cls_bytes);
  const uint32_t slots = static_cast<uint32_t>(slab_bytes_ / cls_bytes);
  if (in_slab % cls_bytes != 0 || index >= slots) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset ", slot.offset, " is not a slot boundary of class ", slot.size_class));
  }
  Slab& slab = slabs_[slab_index];
  const bool formatted_now = slab.size_class < 0;
  if (formatted_now) {
    auto it = std::find(free_slabs_.begin(), free_slabs_.end(), slab_index);
    free_slabs_.erase(it);
    FormatSlab(slab, slot.size_class);
  } else if (slab.size_class != static_cast<int32_t>(slot.size_class)) {
    return absl::FailedPreconditionError(absl::StrCat("slab ", slab_index, " holds class ",
                                                      slab.size_class, ", not ", slot.size_class));
  }
  if (!Take(slab, index)) {
    return absl::FailedPreconditionError(
        absl::StrCat("slot at offset ", slot.offset, " is already allocated"));
  }
  used_bytes_ += cls_bytes;
  // A slab formatted before with a free slot left is already partial.
  if (slab.in_use == slab.slots) {
    partial_slabs_[slot.size_class].erase(slab_index);
  } else if (formatted_now) {
    partial_slabs_[slot.size_class].insert(slab_index);
  }
  return absl::OkStatus();
}

void SlabAllocator::Free(const Slot& slot) {
  const uint32_t slab_index = static_cast<uint32_t>(slot.offset / slab_bytes_);
  if (slab_index >= slabs_.size() || slot.size_class >= class_bytes_.size()) {
    std::fprintf(stderr, "SlabAllocator::Free: slot offset %llu is outside the arena\n",
                 static_cast<unsigned long long>(slot.offset));
    std::abort();
  }
  Slab& slab = slabs_[slab_index];
  const uint64_t cls_bytes = class_bytes_[slot.size_class];
  const uint64_t in_slab = slot.offset % slab_bytes_;
  const uint32_t index = static_cast<uint32_t>(in_slab / cls_bytes);
  const uint64_t bit = uint64_t{1} << (index % 64);
  if (slab.size_class != static_cast<int32_t>(slot.size_class) || in_slab % cls_bytes != 0 ||
      index >= slab.slots || (slab.taken[index / 64] & bit) == 0) {
    std::fprintf(stderr, "SlabAllocator::Free: slot at offset %llu (class %u) is not allocated\n",
                 static_cast<unsigned long long>(slot.offset), slot.size_class);
    std::abort();
  }
  slab.taken[index / 64] &= ~bit;
  slab.first_open_word = std::min(slab.first_open_word, index / 64);
  --slab.in_use;
  used_bytes_ -= cls_bytes;
  if (slab.in_use == 0) {
    ReleaseSlab(slab_index);
  } else if (slab.in_use == slab.slots - 1) {  // it was full: partial again
    partial_slabs_[slot.size_class].insert(slab_index);
  }
}

}  // namespace kvtier
