#include "storage/slab_allocator.h"

#include <gtest/gtest.h>

#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <vector>

namespace kvtier {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

TEST(SlabAllocatorTest, RejectsBadGeometry) {
  EXPECT_FALSE(SlabAllocator::Create(4 * kMiB, 0).ok());
  EXPECT_FALSE(SlabAllocator::Create(4 * kMiB, 1000).ok());
  EXPECT_FALSE(SlabAllocator::Create(1 * kMiB, 2 * kMiB).ok());
  // Slots are 8 bytes: offsets below 2^52, at most 256 classes.
  EXPECT_FALSE(SlabAllocator::Create(SlabAllocator::kMaxCapacity, kMiB).ok());
  EXPECT_TRUE(SlabAllocator::Create(SlabAllocator::kMaxCapacity - SlabAllocator::kMaxSlabBytes,
                                    SlabAllocator::kMaxSlabBytes)
                  .ok());  // 4095 slabs
  EXPECT_FALSE(
      SlabAllocator::Create(4 * SlabAllocator::kMaxSlabBytes, 2 * SlabAllocator::kMaxSlabBytes)
          .ok());
  absl::StatusOr<std::unique_ptr<SlabAllocator>> widest =
      SlabAllocator::Create(SlabAllocator::kMaxSlabBytes, SlabAllocator::kMaxSlabBytes);
  ASSERT_TRUE(widest.ok()) << widest.status();
  EXPECT_LE((*widest)->num_classes(), SlabAllocator::kMaxClasses);
  // The last slot of the widest range round-trips through the 8-byte slot.
  const SlabAllocator::Slot last{SlabAllocator::kMaxCapacity - SlabAllocator::kAlignment,
                                 SlabAllocator::kMaxClasses - 1};
  EXPECT_EQ(last.offset, SlabAllocator::kMaxCapacity - SlabAllocator::kAlignment);
  EXPECT_EQ(last.size_class, SlabAllocator::kMaxClasses - 1);
}

TEST(SlabAllocatorTest, ClassesAreAlignedAndWasteLessThanAnEighth) {
  auto a = *SlabAllocator::Create(64 * kMiB, 8 * kMiB);
  for (uint64_t bytes : {uint64_t{1}, 4 * kKiB, 4 * kKiB + 1, 256 * kKiB, 2 * kMiB, 2 * kMiB + 1,
                         3 * kMiB + 17, 8 * kMiB}) {
    const uint64_t cls = a->ClassBytes(*a->ClassFor(bytes));
    EXPECT_GE(cls, bytes);
    EXPECT_EQ(cls % 4096, 0u);
    if (bytes > 4 * kKiB) {
      EXPECT_LT(cls - bytes, bytes / 8 + 4096) << bytes;
    }
  }
  // Powers of two are classes of their own: no waste for typical blocks.
  EXPECT_EQ(a->ClassBytes(*a->ClassFor(2 * kMiB)), 2 * kMiB);
  EXPECT_FALSE(a->ClassFor(0).ok());
  EXPECT_FALSE(a->ClassFor(8 * kMiB + 1).ok());
}

TEST(SlabAllocatorTest, FillsExactlyAndFreesSlabsBackToThePool) {
  auto a = *SlabAllocator::Create(8 * kMiB, 1 * kMiB);
  const uint32_t cls = *a->ClassFor(256 * kKiB);
  std::vector<SlabAllocator::Slot> slots;
  std::set<uint64_t> offsets;
  while (auto s = a->Allocate(cls)) {
    slots.push_back(*s);
    EXPECT_TRUE(offsets.insert(s->offset).second) << "offset handed out twice";
    EXPECT_LE(s->offset + 256 * kKiB, a->capacity());
  }
  EXPECT_EQ(slots.size(), 32u);  // 8 slabs x 4 slots
  EXPECT_EQ(a->used_bytes(), 8 * kMiB);
  EXPECT_EQ(a->free_slabs(), 0u);
  // A different class cannot be served while every slab is taken...
  const uint32_t big = *a->ClassFor(1 * kMiB);
  EXPECT_FALSE(a->Allocate(big).has_value());
  // ...until one slab is wholly free again.
  for (int i = 0; i < 4; ++i) a->Free(slots[i]);
  EXPECT_EQ(a->free_slabs(), 1u);
  auto s = a->Allocate(big);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(a->used_bytes(), 8 * kMiB);
}

TEST(SlabAllocatorTest, FreedSlotIsReused) {
  auto a = *SlabAllocator::Create(1 * kMiB, 1 * kMiB);
  const uint32_t cls = *a->ClassFor(512 * kKiB);
  auto s1 = *a->Allocate(cls);
  auto s2 = *a->Allocate(cls);
  EXPECT_FALSE(a->Allocate(cls).has_value());
  a->Free(s1);
  auto s3 = a->Allocate(cls);
  ASSERT_TRUE(s3.has_value());
  EXPECT_EQ(s3->offset, s1.offset);
  EXPECT_NE(s2.offset, s1.offset);
}

TEST(SlabAllocatorTest, AllocateAtRebuildsTheSameState) {
  auto a = *SlabAllocator::Create(8 * kMiB, 1 * kMiB);
  const uint32_t small = *a->ClassFor(64 * kKiB), big = *a->ClassFor(512 * kKiB);
  std::vector<SlabAllocator::Slot> taken;
  for (int i = 0; i < 20; ++i) taken.push_back(*a->Allocate(small));
  for (int i = 0; i < 3; ++i) taken.push_back(*a->Allocate(big));
  // Rebuild a fresh allocator from the list of slots, as recovery does.
  auto b = *SlabAllocator::Create(8 * kMiB, 1 * kMiB);
  for (const auto& s : taken) ASSERT_TRUE(b->AllocateAt(s).ok());
  EXPECT_EQ(b->used_bytes(), a->used_bytes());
  EXPECT_EQ(b->free_slabs(), a->free_slabs());
  // The same slot twice, a slot of another class in an assigned slab, and a
  // misaligned offset are refused.
  EXPECT_EQ(b->AllocateAt(taken[0]).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b->AllocateAt({taken[0].offset, big}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b->AllocateAt({taken[0].offset + 4096, small}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b->AllocateAt({64 * kMiB, small}).code(), absl::StatusCode::kInvalidArgument);
  // Allocation continues without handing out a rebuilt slot again.
  std::set<uint64_t> offsets;
  for (const auto& s : taken) offsets.insert(s.offset);
  while (auto s = b->Allocate(small)) EXPECT_TRUE(offsets.insert(s->offset).second);
}

// Claims in any order, allocations and frees, interleaved at random, against
// a model of which slots are taken: Allocate never hands out a taken slot and
// hands out the lowest free one, AllocateAt refuses exactly the taken ones,
// and the counts agree. Slabs of 16 slots (one bitmap word, part used), 85
// (a word and a part) and 256 (four whole words).
TEST(SlabAllocatorTest, ClaimsAllocationsAndFreesInAnyOrderKeepTheSlotsExact) {
  constexpr uint64_t kSlab = 1 * kMiB;
  for (const uint64_t slot_bytes : {64 * kKiB, 12 * kKiB, 4 * kKiB}) {
    SCOPED_TRACE(slot_bytes);
    auto a = *SlabAllocator::Create(4 * kSlab, kSlab);
    const uint32_t cls = *a->ClassFor(slot_bytes);
    ASSERT_EQ(a->ClassBytes(cls), slot_bytes);
    const uint64_t per_slab = kSlab / slot_bytes;
    std::set<uint64_t> taken;
    std::mt19937_64 rng(7);
    for (int step = 0; step < 20000; ++step) {
      const uint64_t slab = rng() % 4;
      const uint64_t offset = slab * kSlab + (rng() % per_slab) * slot_bytes;
      switch (rng() % 3) {
        case 0: {  // claim a given slot
          const absl::Status s = a->AllocateAt({offset, cls});
          EXPECT_EQ(s.ok(), !taken.count(offset)) << step << " " << s;
          if (s.ok()) taken.insert(offset);
          break;
        }
        case 1: {  // any free slot: the lowest of the slab it comes from
          std::optional<SlabAllocator::Slot> s = a->Allocate(cls);
          ASSERT_EQ(s.has_value(), taken.size() < 4 * per_slab) << step;
          if (s) {
            EXPECT_TRUE(taken.insert(s->offset).second) << step;
            const uint64_t slab_start = s->offset / kSlab * kSlab;
            for (uint64_t o = slab_start; o < s->offset; o += slot_bytes) {
              ASSERT_TRUE(taken.count(o)) << step << ": " << s->offset << " before free " << o;
            }
          }
          break;
        }
        default:
          if (taken.count(offset)) {
            a->Free({offset, cls});
            taken.erase(offset);
          }
      }
      ASSERT_EQ(a->used_bytes(), taken.size() * slot_bytes) << step;
      // Per slab, the allocated slots (what HostTier reclaims whole slabs by).
      for (uint32_t s = 0; s < 4; ++s) {
        const auto in_slab =
            std::distance(taken.lower_bound(s * kSlab), taken.lower_bound((s + 1) * kSlab));
        ASSERT_EQ(a->SlotsInUse(s), static_cast<uint32_t>(in_slab)) << step << " slab " << s;
      }
    }
    for (uint64_t o : taken) a->Free({o, cls});
    EXPECT_EQ(a->free_slabs(), 4u);
  }
}

TEST(SlabAllocatorDeathTest, DoubleFreeAborts) {
  auto a = *SlabAllocator::Create(2 * kMiB, 1 * kMiB);
  const uint32_t cls = *a->ClassFor(4096);
  auto s = *a->Allocate(cls);
  auto keep = *a->Allocate(cls);  // keeps the slab assigned to the class
  (void)keep;
  a->Free(s);
  EXPECT_DEATH(a->Free(s), "not allocated");
}

// A 1 MiB slab of 12 KiB slots has 85 (1020 KiB): the offset after the last
// is a slot boundary of the class but no slot, and freeing it is a bug.
TEST(SlabAllocatorDeathTest, FreeingPastTheLastSlotOfASlabAborts) {
  auto a = *SlabAllocator::Create(2 * kMiB, 1 * kMiB);
  const uint32_t cls = *a->ClassFor(12 * kKiB);
  auto s = *a->Allocate(cls);
  ASSERT_EQ(s.offset, 0u);
  EXPECT_DEATH(a->Free({85 * 12 * kKiB, cls}), "is not allocated");
}

}  // namespace
}  // namespace kvtier
