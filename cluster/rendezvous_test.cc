#include "cluster/rendezvous.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

NamespaceId Ns() { return NamespaceId::FromParts(0x0123456789abcdefULL, 0xfedcba9876543210ULL); }

BlockKey Key(int i) {
  std::string bytes(16, '\0');
  for (int b = 0; b < 4; ++b) bytes[b] = static_cast<char>(i >> (8 * b));
  bytes[15] = 'k';
  return BlockKey::Create(bytes).value();
}

constexpr int kKeys = 30000;

std::vector<std::string> Owners(const RendezvousRing& ring) {
  std::vector<std::string> owners;
  owners.reserve(kKeys);
  for (int i = 0; i < kKeys; ++i) owners.emplace_back(ring.OwnerIdOf(Ns(), Key(i)));
  return owners;
}

TEST(RendezvousRingTest, EmptyRingHasNoOwner) {
  const RendezvousRing ring({"", ""});
  EXPECT_TRUE(ring.empty());
  EXPECT_FALSE(ring.OwnerOf(Ns(), Key(1)).has_value());
  EXPECT_EQ(ring.OwnerIdOf(Ns(), Key(1)), "");
}

TEST(RendezvousRingTest, MembersSortedAndDistinct) {
  const RendezvousRing ring({"c:1", "a:1", "c:1", "b:1", ""});
  EXPECT_EQ(ring.members(), (std::vector<std::string>{"a:1", "b:1", "c:1"}));
}

TEST(RendezvousRingTest, SingleMemberOwnsEverything) {
  const RendezvousRing ring({"only:1"});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ring.OwnerIdOf(Ns(), Key(i)), "only:1");
}

TEST(RendezvousRingTest, ThreeMembersShareKeysEvenly) {
  const RendezvousRing ring({"10.0.0.1:50051", "10.0.0.2:50051", "10.0.0.3:50051"});
  std::map<std::string, int> share;
  for (const std::string& owner : Owners(ring)) ++share[owner];
  ASSERT_EQ(share.size(), 3u);
  for (const auto& [id, n] : share) {
    // Expected 10000 each; binomial sd ~82, so +-2% is > 2.4 sd.
    EXPECT_NEAR(n, kKeys / 3, kKeys / 50) << id;
  }
}

TEST(RendezvousRingTest, SampleSharesSumToOneAndAreEven) {
  EXPECT_TRUE(RendezvousRing({}).SampleShares().empty());
  const std::vector<double> shares = RendezvousRing({"a:1", "b:1", "c:1", "d:1"}).SampleShares();
  ASSERT_EQ(shares.size(), 4u);
  double sum = 0;
  for (double s : shares) {
    EXPECT_NEAR(s, 0.25, 0.03);
    sum += s;
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_EQ(RendezvousRing({"solo"}).SampleShares(100), std::vector<double>{1.0});
}

TEST(RendezvousRingTest, OrderOfMembersDoesNotMatter) {
  const RendezvousRing a({"x:1", "y:1", "z:1"});
  const RendezvousRing b({"z:1", "x:1", "y:1"});
  EXPECT_EQ(Owners(a), Owners(b));
}

TEST(RendezvousRingTest, JoinMovesAboutAQuarterAndOnlyToTheNewcomer) {
  const RendezvousRing three({"a:1", "b:1", "c:1"});
  const RendezvousRing four({"a:1", "b:1", "c:1", "d:1"});
  const std::vector<std::string> before = Owners(three);
  const std::vector<std::string> after = Owners(four);
  int moved = 0;
  for (int i = 0; i < kKeys; ++i) {
    if (before[i] == after[i]) continue;
    ++moved;
    EXPECT_EQ(after[i], "d:1") << "key " << i << " moved between staying members";
  }
  EXPECT_NEAR(moved, kKeys / 4, kKeys / 50);
}

TEST(RendezvousRingTest, LeaveMovesOnlyTheLeaversKeys) {
  const RendezvousRing four({"a:1", "b:1", "c:1", "d:1"});
  const RendezvousRing three({"a:1", "b:1", "d:1"});
  const std::vector<std::string> before = Owners(four);
  const std::vector<std::string> after = Owners(three);
  for (int i = 0; i < kKeys; ++i) {
    if (before[i] != "c:1") {
      EXPECT_EQ(before[i], after[i]) << "key " << i;
    } else {
      EXPECT_NE(after[i], "c:1");
    }
  }
}

TEST(RendezvousRingTest, NamespaceChangesTheOwner) {
  const RendezvousRing ring({"a:1", "b:1", "c:1"});
  const NamespaceId other = NamespaceId::FromParts(1, 2);
  int differ = 0;
  for (int i = 0; i < 3000; ++i)
    differ += ring.OwnerIdOf(Ns(), Key(i)) != ring.OwnerIdOf(other, Key(i));
  EXPECT_NEAR(differ, 2000, 150);  // independent draws disagree 2/3 of the time
}

// The owner is a fact every node must compute alike, on any build and
// machine: pinned values (XXH3 is specified bit-exactly).
TEST(RendezvousRingTest, OwnersArePinned) {
  const RendezvousRing ring({"a:1", "b:1", "c:1"});
  std::string got;
  for (int i = 0; i < 12; ++i) absl::StrAppend(&got, ring.OwnerIdOf(Ns(), Key(i)).substr(0, 1));
  EXPECT_EQ(got, "ababcabbbabc");
}

}  // namespace
}  // namespace kvtier
