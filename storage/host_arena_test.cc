#include "storage/host_arena.h"

#include <sys/mman.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/available_memory.h"
#include "gtest/gtest.h"
#include "testing/process_mappings.h"
#include "testing/sanitizers.h"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Sanitizer runtimes map shadow memory beside each new mapping and keep it
// after the munmap: the mapped-bytes check below runs in make test only.
using ::kvtier::testing::kSanitized;

using ::kvtier::testing::MappedBytes;
using ::kvtier::testing::Mapping;
using ::kvtier::testing::MappingOf;
using ::kvtier::testing::VmFlagsOf;

// Whether the kernel has transparent huge pages, switched on.
bool KernelHasTransparentHugePages() {
  const std::string mode = HostArena::TransparentHugePageMode();
  return mode == "always" || mode == "madvise";
}

TEST(HostArenaTest, HugeArenaIsAlignedAdvisedAndWholeUsable) {
  for (uint64_t bytes : {kMiB, 5 * kMiB + 4096, 3 * kMiB + 100, 64 * kMiB}) {
    const uint64_t mapped_before = MappedBytes();
    auto arena = HostArena::Create(bytes, HostArena::Pages::kTransparentHuge);
    ASSERT_TRUE(arena.ok()) << arena.status();
    uint8_t* d = (*arena)->data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % kHugePageBytes, 0u) << bytes;
    EXPECT_EQ((*arena)->size(), bytes);
    // The first and last byte are mapped and writable (the trimmed slack
    // took nothing of the arena).
    d[0] = 1;
    d[bytes - 1] = 2;
    EXPECT_EQ(d[0] + d[bytes - 1], 3);
    const std::string flags = VmFlagsOf(d + bytes - 1);
    ASSERT_NE(flags, "") << "no mapping holds the arena's last byte";
    if (KernelHasTransparentHugePages()) {
      EXPECT_TRUE((*arena)->huge_pages_advised());
      // "hg": the mapping carries MADV_HUGEPAGE, to its last byte.
      EXPECT_NE(flags.find(" hg "), std::string::npos) << flags;
      EXPECT_NE(VmFlagsOf(d).find(" hg "), std::string::npos);
      // The slack mapped to reach the boundary is gone on both sides: the
      // advised mapping is the arena's pages exactly (no other mapping here
      // carries the advice, so none merges with it).
      const Mapping m = MappingOf(d);
      EXPECT_EQ(m.lo, reinterpret_cast<uintptr_t>(d));
      EXPECT_EQ(m.hi, reinterpret_cast<uintptr_t>(d) + (bytes + 4095) / 4096 * 4096) << bytes;
    } else {
      EXPECT_FALSE((*arena)->huge_pages_advised());
    }
    arena->reset();
    // Nothing of the mapping outlives the arena, the slack included.
    if (!kSanitized) {
      EXPECT_EQ(MappedBytes(), mapped_before) << bytes;
    }
  }
}

TEST(HostArenaTest, BaseArenaIsNotAdvised) {
  auto arena = HostArena::Create(4 * kMiB, HostArena::Pages::kBase);
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_FALSE((*arena)->huge_pages_advised());
  const std::string flags = VmFlagsOf((*arena)->data());
  ASSERT_NE(flags, "");
  EXPECT_EQ(flags.find(" hg "), std::string::npos) << flags;
}

// Pages of the arena in memory now, by mincore.
uint64_t ResidentPages(const HostArena& arena) {
  const uint64_t pages = (arena.size() + 4095) / 4096;
  std::vector<unsigned char> in(pages);
  if (mincore(arena.data(), arena.size(), in.data()) != 0) return UINT64_MAX;
  uint64_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(HostArenaTest, CommitAtCreateFaultsInEveryPageAndFirstTouchNone) {
  constexpr uint64_t kBytes = 6 * kMiB + 4096;
  for (const auto pages : {HostArena::Pages::kBase, HostArena::Pages::kTransparentHuge}) {
    auto lazy = HostArena::Create(kBytes, pages, HostArena::Commit::kOnFirstTouch);
    ASSERT_TRUE(lazy.ok()) << lazy.status();
    EXPECT_EQ(ResidentPages(**lazy), 0u);
    (*lazy)->data()[kBytes - 1] = 1;  // the measure sees a touched page
    EXPECT_GE(ResidentPages(**lazy), 1u);

    auto eager = HostArena::Create(kBytes, pages, HostArena::Commit::kAtCreate);
    ASSERT_TRUE(eager.ok()) << eager.status();
    EXPECT_EQ(ResidentPages(**eager), kBytes / 4096);
    EXPECT_EQ((*eager)->data()[kBytes - 1], 0);  // zeroed, as a lazy page reads
  }
}

TEST(HostArenaTest, CommitAtCreateRefusesMoreThanTheKernelHas) {
  const uint64_t available = AvailableMemoryBytes();
  if (available == UINT64_MAX) GTEST_SKIP() << "neither MemAvailable nor a cgroup limit is known";
  const uint64_t bytes = (available * 2 + 4095) / 4096 * 4096;
  auto arena = HostArena::Create(bytes, HostArena::Pages::kBase, HostArena::Commit::kAtCreate);
  ASSERT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted) << arena.status();
  EXPECT_NE(arena.status().message().find("host_tier.prefault"), std::string::npos)
      << arena.status();
}

TEST(HostArenaTest, RejectsEmptyAndImpossibleSizes) {
  EXPECT_EQ(HostArena::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostArena::Create(UINT64_MAX, HostArena::Pages::kTransparentHuge).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostArena::Create(uint64_t{1} << 62).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace kvtier
