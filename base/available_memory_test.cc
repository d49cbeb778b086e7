#include "base/available_memory.h"

#include <map>

#include "gtest/gtest.h"

namespace kvtier {
namespace {

// A file system of the given files.
auto Files(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

TEST(CgroupHeadroomTest, V2LimitLessUsageByTheCgroupsPathOrAtTheRoot) {
  const std::string self = "0::/kvtier.slice/kvtierd.service\n";
  EXPECT_EQ(
      CgroupHeadroom(
          self, Files({
                    {"/sys/fs/cgroup/kvtier.slice/kvtierd.service/memory.max", "1073741824\n"},
                    {"/sys/fs/cgroup/kvtier.slice/kvtierd.service/memory.current", "73741824\n"},
                })),
      1000000000u);
  // A container sees its own cgroup at the root of its /sys/fs/cgroup.
  EXPECT_EQ(CgroupHeadroom(self, Files({{"/sys/fs/cgroup/memory.max", "4096\n"},
                                        {"/sys/fs/cgroup/memory.current", "1024\n"}})),
            3072u);
  EXPECT_EQ(CgroupHeadroom(self, Files({{"/sys/fs/cgroup/memory.max", "max\n"},
                                        {"/sys/fs/cgroup/memory.current", "1024\n"}})),
            UINT64_MAX);
  // Usage at (or, briefly, past) the limit leaves nothing.
  EXPECT_EQ(CgroupHeadroom(self, Files({{"/sys/fs/cgroup/memory.max", "4096"},
                                        {"/sys/fs/cgroup/memory.current", "8192"}})),
            0u);
}

TEST(CgroupHeadroomTest, V1MemoryControllerAmongOthers) {
  const std::string self = "4:memory,hugetlb:/job/42\n0::/\n1:cpu:/\n";
  EXPECT_EQ(CgroupHeadroom(
                self, Files({{"/sys/fs/cgroup/memory/job/42/memory.limit_in_bytes", "2097152"},
                             {"/sys/fs/cgroup/memory/job/42/memory.usage_in_bytes", "1048576"}})),
            1048576u);
  // v1's "no limit": 2^63 - 1 rounded down to a page.
  EXPECT_EQ(CgroupHeadroom(
                self, Files({{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712"},
                             {"/sys/fs/cgroup/memory/memory.usage_in_bytes", "5"}})),
            UINT64_MAX);
}

TEST(CgroupHeadroomTest, NothingKnownIsUnlimited) {
  EXPECT_EQ(CgroupHeadroom("", Files({})), UINT64_MAX);
  EXPECT_EQ(CgroupHeadroom("0::/a\n", Files({})), UINT64_MAX);
  EXPECT_EQ(CgroupHeadroom("garbage\n", Files({{"/sys/fs/cgroup/memory.max", "1"}})), UINT64_MAX);
  // A limit without a readable usage is not taken.
  EXPECT_EQ(CgroupHeadroom("0::/\n", Files({{"/sys/fs/cgroup/memory.max", "1"}})), UINT64_MAX);
}

TEST(AvailableMemoryTest, IsNoMoreThanMemAvailable) {
  const uint64_t available = AvailableMemoryBytes();
  // This process runs, so some memory is there, and no machine here has 2^50 bytes.
  EXPECT_GT(available, 0u);
  EXPECT_LT(available, uint64_t{1} << 50);
}

}  // namespace
}  // namespace kvtier
