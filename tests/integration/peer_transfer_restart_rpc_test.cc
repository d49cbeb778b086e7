// Prefill-to-decode transfer between two daemons over UCX on loopback, with
// one of them in its own process, stopped or killed with SIGKILL
// mid-transfer, and reconnection to it once restarted.
#include "tests/integration/peer_transfer_rpc_fixture.h"

namespace kvtier {
namespace {

using client::Client;
using client::TransferDirection;

// The source in its own process, stopped and then killed mid-transfer, and
// restarted on the same address.
TEST_F(PeerTransferRpcTest, ASourceStoppedOrKilledMidTransferLeavesOnlyVerifiedBlocks) {
  const int port = FreePort();
  auto child = std::make_unique<ChildDaemon>(port, "prefill");
  std::unique_ptr<Client> cc;
  absl::StatusOr<std::string> cns = StartAndOpen(*child, &cc);
  ASSERT_TRUE(cns.ok()) << cns.status();
  ASSERT_EQ(*cns, ns_);
  const std::vector<std::string> keys = NumberedKeys("child", 256);  // 16 MiB
  PutChain(*cc, keys);

  // Stopped (SIGSTOP) before anything: the pull's Hello hits the deadline.
  child->Signal(SIGSTOP);
  absl::Time start = absl::Now();
  auto r = dc_->Transfer(ns_, keys, child->address(), TransferDirection::kPull, absl::Seconds(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
  EXPECT_EQ(LeadingOk(*r), 0u);
  EXPECT_FALSE(r->blocks[0].status.ok());
  ExpectDecodeHasExactly(keys, 0);
  child->Signal(SIGCONT);

  // Resumed: the same pull works (and connects).
  r = dc_->Transfer(ns_, std::vector<std::string>(keys.begin(), keys.begin() + 8), child->address(),
                    TransferDirection::kPull);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 8u);
  ExpectDecodeHasExactly(keys, 8);

  // Stopped after it exported the blocks and before their bytes moved (the
  // decode side's transport is held up for 1 s first): the gets get no
  // answer, the UCX deadline cancels them (forced close), and nothing more
  // lands.
  decode_faults_->SetPlan({.latency_spike = 1.0, .spike = absl::Seconds(1)});
  {
    std::thread stopper = WhenTheTransportStalls(decode_faults_, [&] { child->Signal(SIGSTOP); });
    start = absl::Now();
    r = dc_->Transfer(ns_, keys, child->address(), TransferDirection::kPull, absl::Seconds(3));
    stopper.join();
  }
  decode_faults_->SetPlan({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(LeadingOk(*r), 8u);
  EXPECT_EQ(r->blocks[8].status.code(), absl::StatusCode::kDeadlineExceeded) << r->blocks[8].status;
  ExpectDecodeHasExactly(keys, 8);
  child->Signal(SIGCONT);

  // Killed (SIGKILL) after it exported the blocks and before their bytes
  // moved (the decode side's transport is held up for 1 s first): the pull
  // ends within its deadline, and the decode side holds exactly the blocks
  // it had, each byte-exact; the slots reserved for the rest are freed.
  decode_faults_->SetPlan({.latency_spike = 1.0, .spike = absl::Seconds(1)});
  std::thread killer = WhenTheTransportStalls(decode_faults_, [&] { child->Kill(); });
  start = absl::Now();
  r = dc_->Transfer(ns_, keys, child->address(), TransferDirection::kPull, absl::Seconds(5));
  killer.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(12));
  decode_faults_->SetPlan({});
  EXPECT_EQ(LeadingOk(*r), 8u);
  for (size_t i = 8; i < keys.size(); ++i) EXPECT_FALSE(r->blocks[i].status.ok()) << i;
  EXPECT_EQ(r->blocks[8].status.code(), absl::StatusCode::kUnavailable) << r->blocks[8].status;
  ExpectDecodeHasExactly(keys, 8);

  // The decode daemon keeps serving its own traffic.
  PutChain(*dc_, {"after-kill"});
  EXPECT_EQ(Matched(*dc_, {"after-kill"}), 1u);

  // The source comes back on the same address (a new process, new UCX
  // worker): the next pull reconnects and completes.
  child = std::make_unique<ChildDaemon>(port, "prefill");
  cns = StartAndOpen(*child, &cc);
  ASSERT_TRUE(cns.ok()) << cns.status();
  PutChain(*cc, keys);
  r = dc_->Transfer(ns_, keys, child->address(), TransferDirection::kPull);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 256u) << r->blocks[LeadingOk(*r) % 256].status;
  ExpectDecodeHasExactly(keys, 256);
  v1::ListPeersResponse peers = Peers(*decode_);
  ASSERT_EQ(peers.peers_size(), 1);
  EXPECT_GE(peers.peers(0).connects(), 2u);
  EXPECT_TRUE(peers.peers(0).connected());
}

// The receiver in its own process, stopped and then killed while a push
// is under way (after Stage, before the puts), and restarted.
TEST_F(PeerTransferRpcTest, AReceiverStoppedOrKilledMidPushFailsItCleanly) {
  const int port = FreePort();
  auto child = std::make_unique<ChildDaemon>(port, "decode");
  auto start_child = [&] {
    std::unique_ptr<Client> cc;
    absl::StatusOr<std::string> cns = StartAndOpen(*child, &cc);
    EXPECT_TRUE(cns.ok()) << cns.status();
    return cc;
  };
  std::unique_ptr<Client> cc = start_child();
  const std::vector<std::string> keys = NumberedKeys("to-child", 64);
  PutChain(*pc_, keys);
  auto child_has = [&](size_t n) {
    auto l = cc->Lookup(ns_, keys);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->matched, n);
  };
  // A first push connects.
  auto r = pc_->Transfer(ns_, std::vector<std::string>(keys.begin(), keys.begin() + 4),
                         child->address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u);

  // Stopped between Stage and the puts: the puts and their flush get no
  // answer; the deadline fails the rest, and the prefill side serves on.
  faults_->SetPlan({.latency_spike = 1.0, .spike = absl::Seconds(1)});
  {
    std::thread stopper = WhenTheTransportStalls(faults_, [&] { child->Signal(SIGSTOP); });
    const absl::Time start = absl::Now();
    r = pc_->Transfer(ns_, keys, child->address(), TransferDirection::kPush, absl::Seconds(3));
    stopper.join();
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
  faults_->SetPlan({});
  ASSERT_TRUE(r.ok()) << r.status();
  // Not even the 4 blocks the receiver had are reported OK: its Commit went
  // unanswered, so nothing is known (a false negative costs a recompute, a
  // false positive would cost wrong output).
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_FALSE(r->blocks[i].status.ok()) << i;
  EXPECT_EQ(r->blocks[4].status.code(), absl::StatusCode::kDeadlineExceeded) << r->blocks[4].status;
  EXPECT_EQ(Matched(*pc_, keys), 64u);
  child->Signal(SIGCONT);
  // Whatever bytes reached the stopped receiver were never committed.
  child_has(4);

  // Resumed: the next push reconnects and completes.
  r = pc_->Transfer(ns_, keys, child->address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 64u) << r->blocks[LeadingOk(*r) % 64].status;
  child_has(64);

  // Killed (SIGKILL) mid-push: the push fails cleanly, fast.
  const std::vector<std::string> more = NumberedKeys("to-child-2", 32);
  PutChain(*pc_, more);
  faults_->SetPlan({.latency_spike = 1.0, .spike = absl::Seconds(1)});
  {
    std::thread killer = WhenTheTransportStalls(faults_, [&] { child->Kill(); });
    const absl::Time start = absl::Now();
    r = pc_->Transfer(ns_, more, child->address(), TransferDirection::kPush, absl::Seconds(5));
    killer.join();
    EXPECT_LT(absl::Now() - start, absl::Seconds(12));
  }
  faults_->SetPlan({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 0u);
  EXPECT_TRUE(r->blocks[0].status.code() == absl::StatusCode::kUnavailable ||
              r->blocks[0].status.code() == absl::StatusCode::kDeadlineExceeded)
      << r->blocks[0].status;
  EXPECT_EQ(Matched(*pc_, more), 32u);

  // Restarted (an empty daemon, new UCX worker, same address): a push
  // reconnects after finding out the old connection is gone.
  child = std::make_unique<ChildDaemon>(port, "decode");
  cc = start_child();
  r = pc_->Transfer(ns_, more, child->address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  // The restarted daemon does not have the first chain, so `more` (a root
  // chain of its own) lands whole.
  EXPECT_EQ(LeadingOk(*r), 32u) << r->blocks[LeadingOk(*r) % 32].status;
  auto l = cc->Lookup(ns_, more);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->matched, 32u);
  auto got = cc->Get(ns_, more);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t i = 0; i < more.size(); ++i)
    EXPECT_EQ((*got)[i], DeterministicString(ns_ + more[i], kBlock));
}

}  // namespace
}  // namespace kvtier
