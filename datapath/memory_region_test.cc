// RegionTable: limits, lifetime, tenants and owners of registered regions.
#include "datapath/memory_region.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <memory>
#include <string>

#include "testing/vector_region.h"

namespace kvtier {
namespace {

TEST(RegionTableTest, LimitsAndLifetime) {
  RegionTable table(2, 3 << 20);
  auto a = table.Add(std::make_unique<VectorRegion>(1 << 20));
  auto b = table.Add(std::make_unique<VectorRegion>(1 << 20));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(table.Add(std::make_unique<VectorRegion>(1)).status().code(),
            absl::StatusCode::kResourceExhausted);  // count
  auto held = table.Find(*a);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(table.Remove(*a).ok());
  EXPECT_EQ((*held)->size(), 1u << 20);  // still mapped for its holder
  EXPECT_EQ(table.Find(*a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Remove(*a).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Add(std::make_unique<VectorRegion>(3 << 20)).status().code(),
            absl::StatusCode::kResourceExhausted);  // bytes
  EXPECT_EQ(table.size(), 1u);
}

// A region belongs to the tenant that registered it: another tenant can
// neither use nor unregister it, and cannot tell it from an unknown id.
TEST(RegionTableTest, RegionsBelongToTheirTenant) {
  RegionTable table(4, 4 << 20);
  absl::StatusOr<std::string> a = table.Add(std::make_unique<VectorRegion>(4096), 0, "alpha");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(table.Find(*a, "alpha").ok());
  const absl::Status other = table.Find(*a, "beta").status();
  EXPECT_EQ(other.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(other.message(), "memory region '" + *a + "' is not registered");
  EXPECT_EQ(table.Find(*a).status().code(), absl::StatusCode::kNotFound);  // tenant ""
  EXPECT_EQ(table.Remove(*a, "beta").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_TRUE(table.Remove(*a, "alpha").ok());
  EXPECT_EQ(table.size(), 0u);
}

// Registrations owned by a process go away when it exits.
TEST(RegionTableTest, RegionsOfAnExitedOwnerAreDropped) {
  RegionTable table(8, 1 << 30);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  absl::StatusOr<std::string> owned =
      table.Add(std::make_unique<VectorRegion>(4096), static_cast<int>(child));
  ASSERT_TRUE(owned.ok()) << owned.status();
  absl::StatusOr<std::string> unowned = table.Add(std::make_unique<VectorRegion>(4096));
  ASSERT_TRUE(unowned.ok());
  EXPECT_EQ(table.RemoveExitedOwners(), 0u);  // still running
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(table.RemoveExitedOwners(), 1u);
  EXPECT_EQ(table.Find(*owned).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(table.Find(*unowned).ok());
  EXPECT_EQ(table.size(), 1u);
  // A process that does not exist cannot own a region.
  EXPECT_EQ(table.Add(std::make_unique<VectorRegion>(4096), child).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Add(std::make_unique<VectorRegion>(4096), -5).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace kvtier
