#include "storage/lease_table.h"

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace kvtier {
namespace {

const NamespaceId kNsA = NamespaceId::FromParts(1, 2);
const NamespaceId kNsB = NamespaceId::FromParts(3, 4);
const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(LeaseTableTest, IdsAreUniqueHex) {
  LeaseTable table;
  absl::flat_hash_set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    const std::string id = table.Add(Lease{{}, kT0, "t", kNsA});
    ASSERT_EQ(id.size(), 32u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_EQ(table.size(), 100u);
}

TEST(LeaseTableTest, FindChecksTheTenant) {
  LeaseTable table;
  BlockRecord a, b;
  const std::string id = table.Add(Lease{{&a, &b}, kT0, "t", kNsA});
  const Lease* lease = table.Find(id, "t");
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->blocks.size(), 2u);
  EXPECT_EQ(lease->blocks[1], &b);
  EXPECT_EQ(table.Find(id, "other"), nullptr);
  EXPECT_EQ(table.Find("0123", "t"), nullptr);
}

TEST(LeaseTableTest, RemoveTakesTheLeaseOutOnce) {
  LeaseTable table;
  BlockRecord a;
  const std::string id = table.Add(Lease{{&a}, kT0, "t", kNsA});
  std::optional<Lease> removed = table.Remove(id);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->blocks, std::vector<BlockRecord*>{&a});
  EXPECT_EQ(removed->tenant, "t");
  EXPECT_FALSE(table.Remove(id).has_value());
  EXPECT_EQ(table.size(), 0u);
  // Its expiry went with it.
  EXPECT_TRUE(table.Expire(kT0 + absl::Hours(1)).empty());
}

TEST(LeaseTableTest, ExpireTakesDueLeasesEarliestFirst) {
  LeaseTable table;
  BlockRecord a, b, c;
  table.Add(Lease{{&c}, kT0 + absl::Seconds(3), "t", kNsA});
  table.Add(Lease{{&a}, kT0 + absl::Seconds(1), "t", kNsA});
  table.Add(Lease{{&b}, kT0 + absl::Seconds(2), "t", kNsB});
  EXPECT_TRUE(table.Expire(kT0).empty());
  std::vector<Lease> due = table.Expire(kT0 + absl::Seconds(2));  // at expiry: expired
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].blocks[0], &a);
  EXPECT_EQ(due[1].blocks[0], &b);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.IdsIn(kNsB).size(), 0u);
  EXPECT_EQ(table.IdsIn(kNsA).size(), 1u);
}

TEST(LeaseTableTest, IdsInListsOnlyThatNamespace) {
  LeaseTable table;
  const std::string a1 = table.Add(Lease{{}, kT0, "t", kNsA});
  const std::string b1 = table.Add(Lease{{}, kT0, "t", kNsB});
  const std::string a2 = table.Add(Lease{{}, kT0, "t", kNsA});
  std::vector<std::string> in_a = table.IdsIn(kNsA);
  std::sort(in_a.begin(), in_a.end());
  std::vector<std::string> want = {a1, a2};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(in_a, want);
  EXPECT_EQ(table.IdsIn(kNsB), std::vector<std::string>{b1});
}

}  // namespace
}  // namespace kvtier
