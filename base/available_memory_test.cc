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

// The kernel charges a cgroup's pages to each of its ancestors too: the
// tightest of them bounds what the process may commit.
TEST(CgroupHeadroomTest, AncestorsLimitsCountUpToTheHierarchysRoot) {
  const std::string self = "0::/kvtier.slice/kvtierd.service\n";
  const std::string slice = "/sys/fs/cgroup/kvtier.slice/";
  const std::string service = slice + "kvtierd.service/";
  // An unlimited leaf under a limited parent.
  EXPECT_EQ(CgroupHeadroom(self, Files({{service + "memory.max", "max\n"},
                                        {service + "memory.current", "100\n"},
                                        {slice + "memory.max", "5000\n"},
                                        {slice + "memory.current", "3000\n"}})),
            2000u);
  // A limited leaf under a tighter parent, and under a looser one.
  EXPECT_EQ(CgroupHeadroom(self, Files({{service + "memory.max", "4000"},
                                        {service + "memory.current", "100"},
                                        {slice + "memory.max", "1000"},
                                        {slice + "memory.current", "500"}})),
            500u);
  EXPECT_EQ(CgroupHeadroom(self, Files({{service + "memory.max", "400"},
                                        {service + "memory.current", "100"},
                                        {slice + "memory.max", "max"},
                                        {slice + "memory.current", "500"}})),
            300u);
  // A parent with no files of its own (here, the root's) is passed over.
  EXPECT_EQ(CgroupHeadroom(self, Files({{service + "memory.max", "max"},
                                        {service + "memory.current", "1"},
                                        {"/sys/fs/cgroup/memory.max", "64"},
                                        {"/sys/fs/cgroup/memory.current", "60"}})),
            4u);
  // The walk stops at the hierarchy's root: /sys/fs is not a cgroup.
  EXPECT_EQ(CgroupHeadroom("0::/\n", Files({{"/sys/fs/cgroup/memory.max", "max"},
                                            {"/sys/fs/cgroup/memory.current", "1"},
                                            {"/sys/fs/memory.max", "1"},
                                            {"/sys/fs/memory.current", "1"}})),
            UINT64_MAX);
  // v1: the same walk.
  EXPECT_EQ(
      CgroupHeadroom(
          "5:memory:/job/42\n",
          Files({{"/sys/fs/cgroup/memory/job/42/memory.limit_in_bytes", "9223372036854771712"},
                 {"/sys/fs/cgroup/memory/job/42/memory.usage_in_bytes", "10"},
                 {"/sys/fs/cgroup/memory/job/memory.limit_in_bytes", "4096"},
                 {"/sys/fs/cgroup/memory/job/memory.usage_in_bytes", "1024"}})),
      3072u);
  // A cgroup without the memory controller (no memory files of its own) is
  // charged to its nearest ancestor that has it.
  EXPECT_EQ(CgroupHeadroom(self, Files({{service + "cgroup.procs", "42\n"},
                                        {slice + "memory.max", "5000"},
                                        {slice + "memory.current", "4000"}})),
            1000u);
  // A cgroup whose name starts with two dots is a cgroup like any other.
  EXPECT_EQ(CgroupHeadroom("0::/..hidden\n", Files({{"/sys/fs/cgroup/..hidden/memory.max", "64"},
                                                    {"/sys/fs/cgroup/..hidden/memory.current", "4"},
                                                    {"/sys/fs/cgroup/memory.max", "1000"},
                                                    {"/sys/fs/cgroup/memory.current", "4"}})),
            60u);
  // A path outside the cgroup namespace's root: the root alone is read.
  EXPECT_EQ(CgroupHeadroom("0::/../../other\n", Files({{"/sys/fs/cgroup/memory.max", "64"},
                                                       {"/sys/fs/cgroup/memory.current", "4"}})),
            60u);
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
