#include "cluster/membership.h"

#include <gtest/gtest.h>

#include <atomic>

#include "cluster/testing/fake_etcd.h"

namespace kvtier {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(3);

MemberRecord Self(std::string node_id, std::string daemon_id) {
  MemberRecord r;
  r.node_id = std::move(node_id);
  r.daemon_id = std::move(daemon_id);
  return r;
}

class MembershipTest : public ::testing::Test {
 protected:
  std::unique_ptr<Membership> Member(const std::string& node_id,
                                     const std::string& daemon_id = "") {
    MemberRecord self;
    self.node_id = node_id;
    self.daemon_id = daemon_id.empty() ? "d-" + node_id : daemon_id;
    auto membership = Membership::Create(
        {.cluster = "test", .lease_ttl = kTtl}, std::make_unique<FakeEtcdClient>(&etcd_), self,
        [this, node_id] {
          MemberRecord r;
          r.address = node_id + ":50051";
          r.role = role_;
          r.transport = node_id != without_transport_;
          r.host_free_bytes = free_bytes_.load();
          return r;
        },
        &clock_);
    EXPECT_TRUE(membership.ok()) << membership.status();
    return std::move(membership).value();
  }
  // One beat: every member in `members` runs a round, then time moves on.
  void Beat(std::initializer_list<Membership*> members) {
    for (Membership* m : members) m->Tick().IgnoreError();
    clock_.Advance(kTtl / 3);
  }
  static std::vector<std::string> Ids(const Membership& m) { return m.Ring()->members(); }

  FakeClock clock_;
  FakeEtcd etcd_{&clock_};
  std::string role_ = "both";
  std::string without_transport_;  // a node that serves no peer transfers
  std::atomic<uint64_t> free_bytes_{100};
};

TEST_F(MembershipTest, RejectsBadOptions) {
  const MemberRecord self = Self("n1", "d");
  auto describe = [] { return MemberRecord(); };
  EXPECT_FALSE(Membership::Create({.cluster = "a/b"}, std::make_unique<FakeEtcdClient>(&etcd_),
                                  self, describe, &clock_)
                   .ok());
  EXPECT_FALSE(Membership::Create({.lease_ttl = absl::Milliseconds(500)},
                                  std::make_unique<FakeEtcdClient>(&etcd_), self, describe, &clock_)
                   .ok());
  EXPECT_FALSE(Membership::Create({}, std::make_unique<FakeEtcdClient>(&etcd_), Self("a b", "d"),
                                  describe, &clock_)
                   .ok());
  EXPECT_FALSE(Membership::Create({}, std::make_unique<FakeEtcdClient>(&etcd_), Self("n1", ""),
                                  describe, &clock_)
                   .ok());
}

TEST_F(MembershipTest, BeforeItsFirstRoundANodeIsAlone) {
  auto a = Member("a");
  EXPECT_EQ(Ids(*a), std::vector<std::string>{"a"});
  EXPECT_TRUE(a->View().local_only);
  EXPECT_FALSE(a->View().etcd_up);
}

TEST_F(MembershipTest, ThreeMembersJoinAndAgreeOnOwners) {
  auto a = Member("a"), b = Member("b"), c = Member("c");
  Beat({a.get(), b.get(), c.get()});
  Beat({a.get(), b.get(), c.get()});
  const std::vector<std::string> all = {"a", "b", "c"};
  for (Membership* m : {a.get(), b.get(), c.get()}) {
    EXPECT_EQ(Ids(*m), all);
    const MembershipView view = m->View();
    EXPECT_TRUE(view.etcd_up);
    EXPECT_FALSE(view.local_only);
    ASSERT_EQ(view.members.size(), 3u);
    EXPECT_EQ(view.members[1].address, "b:50051");
    EXPECT_EQ(view.members[1].daemon_id, "d-b");
    EXPECT_NE(view.lease, 0);
  }
  const NamespaceId ns = NamespaceId::FromParts(1, 2);
  for (int i = 0; i < 200; ++i) {
    const BlockKey key = BlockKey::Create(std::string(8, static_cast<char>(i))).value();
    EXPECT_EQ(a->Ring()->OwnerIdOf(ns, key), b->Ring()->OwnerIdOf(ns, key));
    EXPECT_EQ(a->Ring()->OwnerIdOf(ns, key), c->Ring()->OwnerIdOf(ns, key));
  }
}

TEST_F(MembershipTest, ADeadMemberLeavesTheRingWithinItsLeaseAndABeat) {
  auto a = Member("a"), b = Member("b"), c = Member("c");
  Beat({a.get(), b.get(), c.get()});
  Beat({a.get(), b.get(), c.get()});
  // c dies: it stops renewing. Its lease was renewed at most a beat ago.
  absl::Duration since_death = absl::ZeroDuration();
  while (Ids(*a).size() == 3 && since_death < 3 * kTtl) {
    Beat({a.get(), b.get()});
    since_death += kTtl / 3;
  }
  EXPECT_EQ(Ids(*a), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Ids(*b), (std::vector<std::string>{"a", "b"}));
  EXPECT_LE(since_death, kTtl + kTtl / 3);
  EXPECT_EQ(a->View().leaves, 1u);
}

TEST_F(MembershipTest, LeaveTakesTheNodeOutAtTheNextRound) {
  auto a = Member("a"), b = Member("b");
  Beat({a.get(), b.get()});
  b->Leave();
  EXPECT_EQ(Ids(*b), std::vector<std::string>{"b"});
  EXPECT_EQ(b->Tick().code(), absl::StatusCode::kFailedPrecondition);
  a->Tick().IgnoreError();
  EXPECT_EQ(Ids(*a), std::vector<std::string>{"a"});
  b->Leave();  // idempotent
}

TEST_F(MembershipTest, EtcdAwayKeepsTheViewForATtlThenGoesLocalOnlyThenRecovers) {
  auto a = Member("a"), b = Member("b");
  Beat({a.get(), b.get()});
  Beat({a.get(), b.get()});
  etcd_.set_reachable(false);
  EXPECT_EQ(a->Tick().code(), absl::StatusCode::kUnavailable);
  MembershipView view = a->View();
  EXPECT_FALSE(view.etcd_up);
  EXPECT_NE(view.last_error.find("unreachable"), std::string::npos) << view.last_error;
  EXPECT_FALSE(view.local_only);  // the last view is a beat old
  EXPECT_EQ(Ids(*a).size(), 2u);
  clock_.Advance(kTtl);
  a->Tick().IgnoreError();
  view = a->View();
  EXPECT_TRUE(view.local_only);
  EXPECT_EQ(Ids(*a), std::vector<std::string>{"a"});
  EXPECT_GE(view.failed_rounds, 2u);
  // etcd back after our lease expired: a registers afresh.
  etcd_.set_reachable(true);
  ASSERT_TRUE(a->Tick().ok());
  ASSERT_TRUE(b->Tick().ok());
  ASSERT_TRUE(a->Tick().ok());
  view = a->View();
  EXPECT_TRUE(view.etcd_up);
  EXPECT_FALSE(view.local_only);
  EXPECT_EQ(view.last_error, "");
  EXPECT_EQ(Ids(*a), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Ids(*b), (std::vector<std::string>{"a", "b"}));
}

TEST_F(MembershipTest, ARestartedNodeRejoinsWithItsNewDaemonId) {
  auto a = Member("a"), b = Member("b");
  Beat({a.get(), b.get()});
  b.reset();  // leaves (revokes)
  b = Member("b", "d-b-second-life");
  Beat({a.get(), b.get()});
  Beat({a.get(), b.get()});
  const MembershipView view = a->View();
  ASSERT_EQ(view.members.size(), 2u);
  EXPECT_EQ(view.members[1].daemon_id, "d-b-second-life");
  EXPECT_EQ(Ids(*a), (std::vector<std::string>{"a", "b"}));
}

TEST_F(MembershipTest, AKilledNodeThatRestartsBeforeExpiryCountsAsARestart) {
  auto a = Member("a"), b = Member("b");
  Beat({a.get(), b.get()});
  Beat({a.get(), b.get()});
  // b "killed": no Leave, its lease still alive; a new life of b starts.
  auto b2 = Member("b", "d-b-2");
  b2->Tick().IgnoreError();
  a->Tick().IgnoreError();
  const MembershipView view = a->View();
  EXPECT_EQ(view.restarts, 1u);
  EXPECT_EQ(view.members[1].daemon_id, "d-b-2");
  EXPECT_EQ(view.leaves, 0u);
  // The old life's lease expiring later does not take the new record
  // (the old life never runs a round again, like a killed process; it is
  // destroyed only at the end of the test).
  for (int i = 0; i < 6; ++i) Beat({a.get(), b2.get()});
  EXPECT_EQ(Ids(*a), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a->View().members[1].daemon_id, "d-b-2");
}

TEST_F(MembershipTest, MembersThatCannotHoldChainsAreListedButOwnNothing) {
  without_transport_ = "c";  // membership only
  auto a = Member("a"), b = Member("b"), c = Member("c");
  Beat({a.get(), b.get(), c.get()});
  Beat({a.get(), b.get(), c.get()});
  EXPECT_EQ(a->View().members.size(), 3u);
  EXPECT_EQ(Ids(*a), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Ids(*c), (std::vector<std::string>{"a", "b"}));
}

TEST_F(MembershipTest, PublishesOnlyWhatChanged) {
  auto a = Member("a");
  a->Tick().IgnoreError();
  const int first = etcd_.puts();
  EXPECT_EQ(first, 1);
  for (int i = 0; i < 5; ++i) a->Tick().IgnoreError();
  EXPECT_EQ(etcd_.puts(), first);  // nothing changed
  free_bytes_ = 50;
  a->Tick().IgnoreError();
  EXPECT_EQ(etcd_.puts(), first);  // free bytes alone wait for the refresh
  clock_.Advance(absl::Seconds(31));
  // (the lease expired meanwhile: a new lease means a new put anyway)
  a->Tick().IgnoreError();
  EXPECT_EQ(etcd_.puts(), first + 1);
  EXPECT_EQ(a->View().members[0].host_free_bytes, 50u);
  role_ = "decode";
  a->Tick().IgnoreError();  // anything else goes out at once
  EXPECT_EQ(etcd_.puts(), first + 2);
  EXPECT_EQ(a->View().members[0].role, "decode");
}

TEST_F(MembershipTest, FreeBytesRefreshWithoutLeaseLoss) {
  auto a = Member("a");
  a->Tick().IgnoreError();
  free_bytes_ = 7;
  for (int i = 0; i < 33; ++i) Beat({a.get()});  // 33 s, renewed every beat
  EXPECT_EQ(a->View().members[0].host_free_bytes, 7u);
  EXPECT_EQ(etcd_.puts(), 2);
}

TEST_F(MembershipTest, SkipsMalformedRecordsAndSaysSo) {
  auto a = Member("a");
  ASSERT_TRUE(etcd_.Put("/kvtier/test/members/junk", "{not json", 0).ok());
  ASSERT_TRUE(
      etcd_.Put("/kvtier/test/members/x", R"({"node_id":"y","daemon_id":"d","address":"a"})", 0)
          .ok());
  ASSERT_TRUE(a->Tick().ok());
  EXPECT_EQ(a->View().bad_records, 2u);
  EXPECT_EQ(Ids(*a), std::vector<std::string>{"a"});
}

TEST_F(MembershipTest, TwoDaemonsWithOneNodeIdReportTheConflictWithoutFlapping) {
  auto a1 = Member("a", "d-1");
  auto a2 = Member("a", "d-2");
  a1->Tick().IgnoreError();
  a2->Tick().IgnoreError();  // overwrites a1's record
  a1->Tick().IgnoreError();
  const int puts = etcd_.puts();
  for (int i = 0; i < 3; ++i) Beat({a1.get(), a2.get()});
  EXPECT_EQ(etcd_.puts(), puts);
  EXPECT_NE(a1->View().conflict.find("d-2"), std::string::npos) << a1->View().conflict;
  EXPECT_EQ(a2->View().conflict, "");
}

TEST_F(MembershipTest, StartRunsRoundsOnItsOwnThread) {
  // SystemClock: the thread's beat is real time (1 s at the least TTL).
  SystemClock real;
  FakeEtcd etcd(&real);
  auto m = Membership::Create(
      {.cluster = "t", .lease_ttl = absl::Seconds(1)}, std::make_unique<FakeEtcdClient>(&etcd),
      Self("a", "d"), [] { return Self("", ""); }, &real);
  ASSERT_TRUE(m.ok());
  (*m)->Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!(*m)->View().etcd_up && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE((*m)->View().etcd_up);
  (*m)->Leave();
  EXPECT_TRUE(etcd.GetPrefix("/kvtier/t/").value().empty());  // revoked
}

}  // namespace
}  // namespace kvtier
