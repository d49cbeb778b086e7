#include "storage/host_arena.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// The VmFlags of the mapping holding `p` (/proc/self/smaps), or "" if none.
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2) {  // a mapping's first line
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8) + " ";
    }
  }
  return "";
}

bool KernelHasTransparentHugePages() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

TEST(HostArenaTest, HugeArenaIsAlignedAdvisedAndWholeUsable) {
  for (uint64_t bytes : {kMiB, 5 * kMiB + 4096, 64 * kMiB}) {
    auto arena = HostArena::Create(bytes, HostArena::Pages::kTransparentHuge);
    ASSERT_TRUE(arena.ok()) << arena.status();
    uint8_t* d = (*arena)->data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % HostArena::kHugePageBytes, 0u) << bytes;
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
    } else {
      EXPECT_FALSE((*arena)->huge_pages_advised());
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

TEST(HostArenaTest, RejectsEmptyAndImpossibleSizes) {
  EXPECT_EQ(HostArena::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostArena::Create(UINT64_MAX, HostArena::Pages::kTransparentHuge).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostArena::Create(uint64_t{1} << 62).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace kvtier
