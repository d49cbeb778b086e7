// Prefill-to-decode transfer between two real daemons over UCX on loopback
// (UCX_NET_DEVICES=lo, UCX_TLS=tcp): push and pull, byte-exact decode-side
// Lookup and Get, roles, bad input, injected link faults (failed and torn
// operations), a peer that is unreachable, stopped or killed with SIGKILL
// mid-transfer, and reconnection to a restarted peer.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/client.h"
#include "kvtier/shared_region.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/faulty_transport.h"
#include "testing/test_daemon_config.h"
#include "transfer/transport_factory.h"

#ifndef KVTIERD_BINARY
#error "KVTIERD_BINARY must name the kvtierd executable"
#endif

namespace kvtier {
namespace {

using client::Client;
using client::TransferDirection;
using client::TransferResult;

constexpr uint64_t kBlock = 64 * 1024;

std::string Bytes(const std::string& tag, size_t n) {
  std::string out(n, '\0');
  uint64_t x = std::hash<std::string>()(tag) | 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<char>(x >> 56);
  }
  return out;
}

std::vector<std::string> Keys(const std::string& prefix, int n) {
  std::vector<std::string> k;
  for (int i = 0; i < n; ++i) k.push_back(absl::StrCat(prefix, "-", i));
  return k;
}

// Same spec on both daemons, so the same namespace id. 64 KiB blocks:
// 2 * 2 layers * 2 heads * 128 dim * 32 tokens * 2 bytes.
client::NamespaceOptions Spec(uint32_t tokens = 32) {
  client::NamespaceOptions o;
  o.model_id = "pd-model";
  o.layout = {2, 2, 128, "bf16", tokens, 0, 1};
  return o;
}

DaemonConfig Config(const std::string& role) {
  DaemonConfig c = TestDaemonConfig(64ull << 20, 1ull << 20, 1ull << 20);
  c.costmodel_gpu = "h100-sxm";
  c.gpu_tier = "off";
  c.peer_role = role;
  c.peer_timeout_ms = 5000;
  return c;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A kvtierd in its own process, to be stopped or killed.
class ChildDaemon {
 public:
  ChildDaemon(int port, std::string role) : port_(port), role_(std::move(role)) {}
  ~ChildDaemon() { Kill(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  void Start() {
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      // Dies with the test, however the test ends (a sanitizer's exit, a
      // crash): an orphaned, stopped daemon would hold ctest's output pipe
      // open and stall the whole run.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDOUT_FILENO);
      const std::string listen = address();
      execl(KVTIERD_BINARY, KVTIERD_BINARY, "--listen", listen.c_str(), "--host-tier-bytes",
            "256MiB", "--log-level", "warn", "--set", "nvme.dirs=", "--set",
            "costmodel.probe_tiers=false", "--set", "gpu.tier=off", "--set",
            ("peer.role=" + role_).c_str(), "--set", "limits.max_block_bytes=1MiB", "--set",
            "host_tier.slab_bytes=1MiB", "--set", "metrics.listen=off",
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  void Signal(int sig) const { kill(pid_, sig); }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  const int port_;
  const std::string role_;
  pid_t pid_ = -1;
};

// Starts the child daemon, connects `client` to it and opens the test
// namespace there, retrying while it comes up; returns the namespace id.
absl::StatusOr<std::string> StartAndOpen(ChildDaemon& child, std::unique_ptr<Client>* client) {
  child.Start();
  *client = *Client::Connect(child.address());
  absl::StatusOr<client::OpenedNamespace> ns;
  for (int i = 0; i < 300; ++i) {
    if (ns = (*client)->OpenNamespace(Spec()); ns.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!ns.ok()) return ns.status();
  return ns->id;
}

class PeerTransferRpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("UCX_NET_DEVICES", "lo", 1);
    setenv("UCX_TLS", "tcp", 1);
  }

  // A daemon of `role` whose UCX transport is wrapped in a fault injector
  // (no faults until a test sets a plan).
  static std::unique_ptr<Daemon> StartWithFaults(const std::string& role,
                                                 FaultInjectingTransport** faults) {
    auto transport =
        std::make_unique<FaultInjectingTransport>(*CreateTransport(), TransportFaultPlan{});
    *faults = transport.get();
    DaemonSeams seams;
    seams.transport = std::move(transport);
    auto d = Daemon::Start(Config(role), std::move(seams));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  void SetUp() override {
    prefill_ = StartWithFaults("prefill", &faults_);
    decode_ = StartWithFaults("decode", &decode_faults_);
    ASSERT_TRUE(prefill_ != nullptr && decode_ != nullptr);
    pc_ = *Client::Connect(prefill_->listen_address());
    dc_ = *Client::Connect(decode_->listen_address());
    auto pns = pc_->OpenNamespace(Spec());
    ASSERT_TRUE(pns.ok()) << pns.status();
    auto dns = dc_->OpenNamespace(Spec());
    ASSERT_TRUE(dns.ok()) << dns.status();
    ASSERT_EQ(pns->id, dns->id);
    ns_ = pns->id;
  }

  std::vector<std::string> PutChain(Client& c, const std::vector<std::string>& keys) {
    std::vector<std::string> data;
    for (const std::string& k : keys) data.push_back(Bytes(ns_ + k, kBlock));
    EXPECT_TRUE(c.Put(ns_, keys, data).ok());
    return data;
  }

  size_t Matched(Client& c, const std::vector<std::string>& keys) {
    auto r = c.Lookup(ns_, keys);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->matched : 0;
  }

  // Every block the decode side serves is byte-exact, and it serves exactly
  // `n` leading blocks.
  void ExpectDecodeHasExactly(const std::vector<std::string>& keys, size_t n) {
    EXPECT_EQ(Matched(*dc_, keys), n);
    if (n == 0) return;
    std::vector<std::string> head(keys.begin(), keys.begin() + n);
    auto got = dc_->Get(ns_, head);
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t i = 0; i < n; ++i) EXPECT_EQ((*got)[i], Bytes(ns_ + keys[i], kBlock)) << i;
  }

  static size_t LeadingOk(const TransferResult& r) {
    size_t n = 0;
    while (n < r.blocks.size() && r.blocks[n].status.ok()) ++n;
    return n;
  }

  // Runs `act` on its own thread once `t` holds up its first batch (the
  // transfer got past Hello and Stage/export and is about to move bytes),
  // not after a fixed sleep: under a sanitizer or on a loaded machine the
  // handshake alone can outlast any fixed delay. If no batch comes within
  // 30 s the step fails and `act` does not run.
  static std::thread WhenTheTransportStalls(FaultInjectingTransport* t, std::function<void()> act) {
    return std::thread([t, act = std::move(act)] {
      const absl::Time give_up = absl::Now() + absl::Seconds(30);
      while (t->counts().latency_spikes == 0) {
        if (absl::Now() > give_up) {
          ADD_FAILURE() << "the transport never held up a batch: the transfer did not get past "
                           "its handshake";
          return;
        }
        absl::SleepFor(absl::Milliseconds(2));
      }
      act();
    });
  }

  v1::ListPeersResponse Peers(Daemon& d) {
    auto admin = v1::Admin::NewStub(
        grpc::CreateChannel(d.listen_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::ListPeersResponse r;
    EXPECT_TRUE(admin->ListPeers(&ctx, v1::ListPeersRequest(), &r).ok());
    return r;
  }

  FaultInjectingTransport* faults_ = nullptr;         // the prefill daemon's
  FaultInjectingTransport* decode_faults_ = nullptr;  // the decode daemon's
  std::unique_ptr<Daemon> prefill_, decode_;
  std::unique_ptr<Client> pc_, dc_;
  std::string ns_;
};

TEST_F(PeerTransferRpcTest, PushLandsEveryBlockByteExactOnTheDecodeSide) {
  const std::vector<std::string> keys = Keys("push", 12);
  PutChain(*pc_, std::vector<std::string>(keys.begin(), keys.begin() + 10));
  ExpectDecodeHasExactly(keys, 0);

  auto r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->blocks.size(), 12u);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(r->blocks[i].status.ok()) << r->blocks[i].status;
  EXPECT_EQ(r->blocks[10].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r->blocks[11].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r->bytes_moved, 10 * kBlock);
  EXPECT_EQ(r->lanes, "tcp/lo");
  ExpectDecodeHasExactly(keys, 10);

  // The decode engine's path: Lookup with a lease, then Load into its
  // shared-memory region; every block arrives verified and byte-exact.
  {
    auto region = client::SharedRegion::Create(10 * kBlock);
    ASSERT_TRUE(region.ok()) << region.status();
    auto region_id = dc_->RegisterMemory((*region)->path(), (*region)->size());
    ASSERT_TRUE(region_id.ok()) << region_id.status();
    client::LookupOptions lease;
    lease.take_lease = true;
    auto hit = dc_->Lookup(ns_, keys, lease);
    ASSERT_TRUE(hit.ok()) << hit.status();
    ASSERT_EQ(hit->matched, 10u);
    std::vector<client::RegionBlockRef> refs;
    for (int i = 0; i < 10; ++i) refs.push_back({keys[i], "", i * kBlock, kBlock, {}});
    int loaded = 0;
    ASSERT_TRUE(dc_->Load(ns_, *region_id, refs,
                          [&](const client::BlockCompletion& c) {
                            EXPECT_TRUE(c.status.ok()) << c.status;
                            loaded += c.status.ok();
                          })
                    .ok());
    EXPECT_EQ(loaded, 10);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(0, std::memcmp((*region)->data() + i * kBlock, Bytes(ns_ + keys[i], kBlock).data(),
                               kBlock))
          << i;
    }
    EXPECT_TRUE(dc_->Release(hit->lease_id).ok());
    EXPECT_TRUE(dc_->UnregisterMemory(*region_id).ok());
  }

  // A second push moves nothing: the receiver has every block.
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(LeadingOk(*r), 10u);
  EXPECT_EQ(r->bytes_moved, 0u);

  v1::ListPeersResponse peers = Peers(*prefill_);
  ASSERT_EQ(peers.peers_size(), 1);
  const v1::PeerStatus& p = peers.peers(0);
  EXPECT_EQ(p.address(), decode_->listen_address());
  EXPECT_EQ(p.role(), "decode");
  EXPECT_TRUE(p.connected());
  EXPECT_EQ(p.lanes(), "tcp/lo");
  EXPECT_EQ(p.bytes_sent(), 10 * kBlock);
  EXPECT_EQ(p.blocks_sent(), 20u);  // 10 sent + 10 already there
  EXPECT_EQ(p.transfers(), 2u);
  EXPECT_EQ(p.failed_transfers(), 0u);
  EXPECT_GT(p.observed_bytes_per_second(), 0);
  EXPECT_EQ(p.connects(), 1u);
}

TEST_F(PeerTransferRpcTest, PullFetchesTheCachedPrefixOnly) {
  const std::vector<std::string> keys = Keys("pull", 8);
  PutChain(*pc_, std::vector<std::string>(keys.begin(), keys.begin() + 5));
  auto r = dc_->Transfer(ns_, keys, prefill_->listen_address(), TransferDirection::kPull);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 5u);
  for (int i = 5; i < 8; ++i) EXPECT_EQ(r->blocks[i].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r->bytes_moved, 5 * kBlock);
  ExpectDecodeHasExactly(keys, 5);
  // The source's pins went back with ReleaseExport: it can delete them.
  EXPECT_EQ(prefill_->peer_transfer().pending(), 0u);
  EXPECT_TRUE(pc_->Delete(ns_, {keys[4]}, false).ok());
  v1::ListPeersResponse peers = Peers(*decode_);
  ASSERT_EQ(peers.peers_size(), 1);
  EXPECT_EQ(peers.peers(0).bytes_received(), 5 * kBlock);
  EXPECT_EQ(peers.peers(0).role(), "prefill");
}

TEST_F(PeerTransferRpcTest, RolesAndBadInputAreRefusedAndChangeNothing) {
  const std::vector<std::string> keys = Keys("bad", 3);
  PutChain(*pc_, keys);
  PutChain(*dc_, {"decode-own"});
  // A decode daemon does not send; a prefill daemon does not receive.
  auto r = dc_->Transfer(ns_, {"decode-own"}, prefill_->listen_address(), TransferDirection::kPush);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPull);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  // Pushing to another prefill daemon: refused per block by the receiver.
  r = pc_->Transfer(ns_, keys, prefill_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& b : r->blocks) EXPECT_EQ(b.status.code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(pc_->Transfer("00000000000000000000000000000000", keys, decode_->listen_address(),
                          TransferDirection::kPush)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(
      pc_->Transfer(ns_, {}, decode_->listen_address(), TransferDirection::kPush).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pc_->Transfer(ns_, keys, "", TransferDirection::kPush).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pc_->Transfer(ns_, {std::string(40, 'k')}, decode_->listen_address(),
                          TransferDirection::kPush)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);

  // A namespace the decode side has not opened: every block refused there.
  auto other = pc_->OpenNamespace(Spec(16));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(pc_->Put(other->id, {"o"}, {Bytes("o", 32 * 1024)}).ok());
  r = pc_->Transfer(other->id, {"o"}, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocks[0].status.code(), absl::StatusCode::kNotFound) << r->blocks[0].status;

  // Nothing of the refused transfers landed anywhere.
  ExpectDecodeHasExactly(keys, 0);
  EXPECT_EQ(decode_->peer_transfer().pending(), 0u);
  EXPECT_EQ(prefill_->peer_transfer().pending(), 0u);
}

TEST_F(PeerTransferRpcTest, FailedAndTornOperationsNeverLandAndTheLinkRecovers) {
  const std::vector<std::string> keys = Keys("fault", 10);
  PutChain(*pc_, keys);
  // The link dies after 4 block operations: blocks 0..3 land, 4 fails with
  // the transport's error, the rest are aborted (their parent is missing).
  faults_->SetPlan({.fail_after_ops = 4});
  auto r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u);
  EXPECT_EQ(r->blocks[4].status.code(), absl::StatusCode::kUnavailable) << r->blocks[4].status;
  for (int i = 5; i < 10; ++i) EXPECT_EQ(r->blocks[i].status.code(), absl::StatusCode::kAborted);
  ExpectDecodeHasExactly(keys, 4);

  // Every operation torn (half the bytes, reported OK): the receiver's
  // checksum refuses the first block sent; nothing more lands.
  faults_->SetPlan({.torn = 1.0});
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 4u);
  EXPECT_EQ(r->blocks[4].status.code(), absl::StatusCode::kDataLoss) << r->blocks[4].status;
  ExpectDecodeHasExactly(keys, 4);
  // The source's own copy was fine: it still serves it.
  EXPECT_EQ(Matched(*pc_, keys), 10u);

  // Faults stop: the rest goes through.
  faults_->SetPlan({});
  r = pc_->Transfer(ns_, keys, decode_->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(LeadingOk(*r), 10u);
  EXPECT_EQ(r->bytes_moved, 6 * kBlock);
  ExpectDecodeHasExactly(keys, 10);
  EXPECT_EQ(Peers(*prefill_).peers(0).failed_transfers(), 2u);
}

// A peer that stages or exports and never finishes: the slots and pins it
// holds are let go after their ttl.
TEST_F(PeerTransferRpcTest, AbandonedStagesAndExportsLapse) {
  const std::vector<std::string> keys = Keys("lapse", 2);
  PutChain(*pc_, keys);
  auto ns = NamespaceId::FromHex(ns_);
  ASSERT_TRUE(ns.ok());
  const CacheSnapshot before = decode_->cache().Snapshot();
  std::vector<PeerBlockInfo> blocks = {
      {*BlockKey::Create("lapse-x"), BlockKey(), kBlock, 1, 0, false}};
  auto staged = decode_->peer_transfer().Stage(*ns, blocks, absl::Seconds(1));
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_FALSE(staged->stage_id.empty());
  EXPECT_GT(decode_->cache().Snapshot().host.used_bytes, before.host.used_bytes);

  std::vector<BlockKey> bkeys = {*BlockKey::Create(keys[0]), *BlockKey::Create(keys[1])};
  auto exported = prefill_->peer_transfer().Export(*ns, bkeys, absl::Seconds(1));
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_EQ(exported->blocks.size(), 2u);
  // Pinned for the peer: cannot be deleted now.
  EXPECT_EQ(pc_->Delete(ns_, {keys[1]}, false).status().code(),
            absl::StatusCode::kFailedPrecondition);

  absl::SleepFor(absl::Milliseconds(1100));
  decode_->peer_transfer().ExpireStale();
  prefill_->peer_transfer().ExpireStale();
  EXPECT_EQ(decode_->peer_transfer().pending(), 0u);
  EXPECT_EQ(prefill_->peer_transfer().pending(), 0u);
  EXPECT_EQ(decode_->cache().Snapshot().host.used_bytes, before.host.used_bytes);
  EXPECT_EQ(decode_->peer_transfer().Commit(staged->stage_id, 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(prefill_->peer_transfer().ReleaseExport(exported->export_id).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(pc_->Delete(ns_, {keys[1]}, false).ok());
}

TEST_F(PeerTransferRpcTest, AnUnreachablePeerFailsEveryBlockQuickly) {
  const std::vector<std::string> keys = Keys("nowhere", 3);
  PutChain(*pc_, keys);
  const std::string nowhere = absl::StrCat("127.0.0.1:", FreePort());
  const absl::Time start = absl::Now();
  auto r = pc_->Transfer(ns_, keys, nowhere, TransferDirection::kPush, absl::Seconds(2));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& b : r->blocks) {
    EXPECT_TRUE(b.status.code() == absl::StatusCode::kUnavailable ||
                b.status.code() == absl::StatusCode::kDeadlineExceeded)
        << b.status;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(Matched(*pc_, keys), 3u);  // still serving
}

// The source in its own process, stopped and then killed mid-transfer, and
// restarted on the same address.
TEST_F(PeerTransferRpcTest, ASourceStoppedOrKilledMidTransferLeavesOnlyVerifiedBlocks) {
  const int port = FreePort();
  auto child = std::make_unique<ChildDaemon>(port, "prefill");
  std::unique_ptr<Client> cc;
  absl::StatusOr<std::string> cns = StartAndOpen(*child, &cc);
  ASSERT_TRUE(cns.ok()) << cns.status();
  ASSERT_EQ(*cns, ns_);
  const std::vector<std::string> keys = Keys("child", 256);  // 16 MiB
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
  const std::vector<std::string> keys = Keys("to-child", 64);
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
  const std::vector<std::string> more = Keys("to-child-2", 32);
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
  for (size_t i = 0; i < more.size(); ++i) EXPECT_EQ((*got)[i], Bytes(ns_ + more[i], kBlock));
}

}  // namespace
}  // namespace kvtier

namespace kvtier {
namespace {

// With authentication on both daemons: the engines are tenant "alpha" (same
// namespace id on both sides), the prefill daemon presents its peer token to
// the decode daemon, and the push lands. A prefill daemon without the token
// is refused by the decode daemon's Peer service (UNAUTHENTICATED), and
// nothing lands.
TEST(AuthenticatedPeerTransferTest, PeersPresentTheirTokenAndTenantsKeepTheirNamespace) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  setenv("UCX_TLS", "tcp", 1);
  const std::string dir = absl::StrCat(::testing::TempDir(), "kvtier-peer-auth-", getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const std::string identities = dir + "/identities.yaml";
  {
    std::ofstream out(identities);
    out << "identities:\n"
        << "  - {name: engine, token: alpha-token-0123456789, tenant: alpha}\n"
        << "  - {name: prefill-daemon, token: peer-token-0123456789, role: peer}\n";
  }
  ASSERT_EQ(chmod(identities.c_str(), 0600), 0);
  {
    std::ofstream out(dir + "/peer.token");
    out << "peer-token-0123456789\n";
  }
  auto start = [&](const std::string& role, const std::string& token_for) {
    DaemonConfig c = Config(role);
    c.identities_file = identities;
    if (!token_for.empty()) {
      c.peer_token_file = dir + "/peer.token";
      c.peer_allowed = token_for;
    }
    auto d = Daemon::Start(c);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  };
  std::unique_ptr<Daemon> decode = start("decode", "");
  ASSERT_TRUE(decode != nullptr);
  std::unique_ptr<Daemon> prefill = start("prefill", decode->listen_address());
  std::unique_ptr<Daemon> bare = start("prefill", "");
  ASSERT_TRUE(prefill && bare);
  // A token without the list of peers it may go to is a configuration error.
  {
    DaemonConfig c = Config("prefill");
    c.peer_token_file = dir + "/peer.token";
    EXPECT_EQ(Daemon::Start(c).status().code(), absl::StatusCode::kInvalidArgument);
  }
  client::ClientOptions engine;
  engine.credentials.token = "alpha-token-0123456789";
  auto pc = *Client::Connect(prefill->listen_address(), engine);
  auto bc = *Client::Connect(bare->listen_address(), engine);
  auto dc = *Client::Connect(decode->listen_address(), engine);
  auto ns = pc->OpenNamespace(Spec());
  ASSERT_TRUE(ns.ok()) << ns.status();
  ASSERT_EQ(dc->OpenNamespace(Spec())->id, ns->id);
  ASSERT_EQ(bc->OpenNamespace(Spec())->id, ns->id);
  const std::vector<std::string> keys = Keys("auth", 3);
  std::vector<std::string> data;
  for (const std::string& k : keys) data.push_back(Bytes(k, kBlock));
  ASSERT_TRUE(pc->Put(ns->id, keys, data).ok());
  ASSERT_TRUE(bc->Put(ns->id, keys, data).ok());

  auto refused = bc->Transfer(ns->id, keys, decode->listen_address(), TransferDirection::kPush);
  const bool refused_whole =
      !refused.ok() && refused.status().code() == absl::StatusCode::kUnauthenticated;
  bool refused_each = refused.ok();
  if (refused.ok()) {
    ASSERT_EQ(refused->blocks.size(), keys.size());
    for (const auto& b : refused->blocks) {
      refused_each = refused_each && b.status.code() == absl::StatusCode::kUnauthenticated;
    }
  }
  EXPECT_TRUE(refused_whole || refused_each)
      << (refused.ok() ? refused->blocks[0].status : refused.status());
  EXPECT_EQ(dc->Lookup(ns->id, keys)->matched, 0u);

  // An engine cannot make the daemon send its token anywhere else: an
  // address outside peer.allowed is refused before any connection.
  const std::string elsewhere = absl::StrCat("127.0.0.1:", FreePort());
  EXPECT_EQ(pc->Transfer(ns->id, keys, elsewhere, TransferDirection::kPush).status().code(),
            absl::StatusCode::kPermissionDenied);

  auto pushed = pc->Transfer(ns->id, keys, decode->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  for (const auto& b : pushed->blocks) EXPECT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(*dc->Get(ns->id, keys), data);
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace kvtier
