// Item 11 of the hostile-client suite: the peer transport must not reach
// further than the daemon promises, nor index bytes nobody sent.
//  - A daemon with the default configuration has no peer transfer: its Peer
//    service, with authentication off, hands no caller the arena's address
//    and remote key (Hello), pins nothing (Export) and stages nothing.
//  - With peers configured on 127.0.0.1 and UCX_NET_DEVICES unset, UCX
//    opens its TCP sockets on loopback only and the link runs over tcp/lo.
//  - Stage followed by a Commit that claims the checksum of bytes the slot
//    already held (zeros of a fresh arena, or a freed block's bytes) indexes
//    nothing: the receiver filled the slot with bytes the caller cannot know.
#include <arpa/inet.h>
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/checksum.h"
#include "kvtier/client.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/peer.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/loopback_transport.h"
#include "testing/test_daemon_config.h"
#include "transfer/listen_devices.h"
#include "transfer/transport_factory.h"

namespace kvtier {
namespace {

using client::Client;
using client::TransferDirection;

constexpr uint64_t kBlock = 64 * 1024;

// 64 KiB blocks: 2 * 2 layers * 2 heads * 128 dim * 32 tokens * 2 bytes.
client::NamespaceOptions Spec() {
  client::NamespaceOptions o;
  o.model_id = "exposure-model";
  o.layout = {2, 2, 128, "bf16", 32, 0, 1};
  return o;
}

// The embedded defaults, shrunk to test size; nothing peer.* is touched.
DaemonConfig SmallDefaultConfig() {
  DaemonConfig c = TestDaemonConfig(16ull << 20, 1ull << 20, 1ull << 20);
  c.gpu_tier = "off";
  c.costmodel_gpu = "h100-sxm";
  return c;
}

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    if (value.has_value()) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* const name_;
  std::optional<std::string> old_;
};

std::unique_ptr<v1::Peer::Stub> PeerStub(const std::string& address) {
  return v1::Peer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

std::string TransferDetail(const std::string& address, bool* available) {
  auto admin = v1::Admin::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::GetStatusResponse st;
  EXPECT_TRUE(admin->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  *available = st.transfer().available();
  return st.transfer().detail();
}

bool Refused(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
}

// (a), (b): no peer configuration, so no peer transfer, and an
// unauthenticated caller gets nothing out of the Peer service.
TEST(PeerExposureTest, ADefaultDaemonHasNoPeerTransferAndItsPeerServiceRefusesEveryone) {
  auto d = Daemon::Start(SmallDefaultConfig());
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string address = (*d)->listen_address();
  bool available = true;
  const std::string detail = TransferDetail(address, &available);
  EXPECT_FALSE(available) << "default daemon offers peer transfer";
  EXPECT_NE(detail.find("peer"), std::string::npos) << detail;
  if (*TransportBackendName() != '\0') {
    EXPECT_NE(detail.find("no peer configuration"), std::string::npos) << detail;
  }

  auto c = *Client::Connect(address);
  auto ns = c->OpenNamespace(Spec());
  ASSERT_TRUE(ns.ok()) << ns.status();
  ASSERT_TRUE(c->Put(ns->id, {"k0"}, {std::string(kBlock, 'x')}).ok());
  auto peer = PeerStub(address);
  {
    grpc::ClientContext ctx;
    v1::HelloRequest req;
    req.set_daemon_id("intruder");
    v1::HelloResponse resp;
    const grpc::Status s = peer->Hello(&ctx, req, &resp);
    EXPECT_TRUE(Refused(s)) << "Hello answered " << s.error_code() << " " << s.error_message();
    EXPECT_NE(s.error_message().find("peer"), std::string::npos) << s.error_message();
    EXPECT_TRUE(resp.remote_key().empty());
    EXPECT_EQ(resp.memory_base(), 0u);
    EXPECT_TRUE(resp.transport_address().empty());
  }
  {
    grpc::ClientContext ctx;
    v1::ExportRequest req;
    req.set_namespace_id(ns->id);
    req.add_keys("k0");
    req.set_ttl_ms(600'000);
    v1::ExportResponse resp;
    const grpc::Status s = peer->Export(&ctx, req, &resp);
    EXPECT_TRUE(Refused(s)) << "Export answered " << s.error_code() << " " << s.error_message();
    EXPECT_EQ(resp.blocks_size(), 0);
  }
  {
    grpc::ClientContext ctx;
    v1::StageRequest req;
    req.set_namespace_id(ns->id);
    v1::PeerBlock* b = req.add_blocks();
    b->set_key("k1");
    b->set_size_bytes(kBlock);
    b->set_checksum(Checksum64(std::vector<uint8_t>(kBlock, 0)));
    req.set_ttl_ms(600'000);
    v1::StageResponse resp;
    const grpc::Status s = peer->Stage(&ctx, req, &resp);
    EXPECT_TRUE(Refused(s)) << "Stage answered " << s.error_code() << " " << s.error_message();
    EXPECT_EQ(resp.blocks_size(), 0);
  }
  EXPECT_EQ((*d)->peer_transfer().pending(), 0u);
}

// The devices derived from server.listen: loopback for every local-only
// address, every device for a wildcard, and an error naming the host
// rather than a silent "all" for an address no interface owns.
TEST(PeerExposureTest, TheTransportsDevicesFollowTheListenAddress) {
  EXPECT_EQ(*NetDevicesForListen("127.0.0.1:50051"), "lo");
  EXPECT_EQ(*NetDevicesForListen("127.0.0.2:1"), "lo");
  EXPECT_EQ(*NetDevicesForListen("[::1]:50051"), "lo");
  EXPECT_EQ(*NetDevicesForListen("unix:/run/kvtier.sock"), "lo");
  EXPECT_EQ(*NetDevicesForListen("0.0.0.0:50051"), "all");
  EXPECT_EQ(*NetDevicesForListen("[::]:50051"), "all");
  const absl::StatusOr<std::string> foreign = NetDevicesForListen("203.0.113.77:1");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("203.0.113.77"), std::string::npos);
  EXPECT_EQ(NetDevicesForListen("no-port").status().code(), absl::StatusCode::kInvalidArgument);
}

// Local addresses of the TCP sockets this process listens on.
std::vector<std::string> ListeningAddresses(bool* all_loopback) {
  std::set<std::string> inodes;
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(fds)) {
      char target[64] = {};
      const std::string path = absl::StrCat("/proc/self/fd/", e->d_name);
      const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
      if (n > 9 && std::strncmp(target, "socket:[", 8) == 0) {
        inodes.emplace(target + 8, static_cast<size_t>(n) - 9);
      }
    }
    closedir(fds);
  }
  std::vector<std::string> out;
  *all_loopback = true;
  for (const bool v6 : {false, true}) {
    std::ifstream table(v6 ? "/proc/self/net/tcp6" : "/proc/self/net/tcp");
    std::string line;
    std::getline(table, line);  // header
    while (std::getline(table, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
      if (f.size() < 10 || f[3] != "0A" || !inodes.contains(f[9])) continue;
      const std::string local = f[1].substr(0, f[1].find(':'));
      char text[INET6_ADDRSTRLEN] = {};
      bool loopback = false;
      if (!v6) {
        in_addr a{};
        a.s_addr = static_cast<uint32_t>(std::stoul(local, nullptr, 16));  // as the kernel keeps it
        loopback = (ntohl(a.s_addr) >> 24) == 127;
        inet_ntop(AF_INET, &a, text, sizeof text);
      } else {
        in6_addr a{};
        for (int w = 0; w < 4; ++w) {
          const uint32_t word =
              static_cast<uint32_t>(std::stoul(local.substr(w * 8, 8), nullptr, 16));
          std::memcpy(reinterpret_cast<uint8_t*>(&a) + 4 * w, &word, 4);
        }
        loopback = IN6_IS_ADDR_LOOPBACK(&a) ||
                   (IN6_IS_ADDR_V4MAPPED(&a) && reinterpret_cast<uint8_t*>(&a)[12] == 127);
        inet_ntop(AF_INET6, &a, text, sizeof text);
      }
      if (!loopback) *all_loopback = false;
      out.push_back(text);
    }
  }
  return out;
}

// (a): peers configured explicitly, daemons on 127.0.0.1, no
// UCX_NET_DEVICES in the environment: the transport stays on loopback.
TEST(PeerExposureTest, ConfiguredPeersOnLoopbackKeepTheTransportOnLoopback) {
  if (std::string(TransportBackendName()) != "ucx") GTEST_SKIP() << "built without UCX";
  // The daemons must derive the devices from server.listen themselves.
  ScopedEnv devices("UCX_NET_DEVICES", std::nullopt);
  ScopedEnv tls("UCX_TLS", "tcp");
  DaemonConfig pc = SmallDefaultConfig();
  pc.peer_role = "prefill";
  DaemonConfig dc = SmallDefaultConfig();
  dc.peer_role = "decode";
  auto prefill = Daemon::Start(pc);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = Daemon::Start(dc);
  ASSERT_TRUE(decode.ok()) << decode.status();

  EXPECT_EQ((*prefill)->peer_transfer().Info().transport.net_devices, "lo");
  EXPECT_EQ((*decode)->peer_transfer().Info().transport.net_devices, "lo");
  {
    grpc::ClientContext ctx;
    v1::HelloRequest req;
    v1::HelloResponse resp;
    ASSERT_TRUE(PeerStub((*decode)->listen_address())->Hello(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.net_devices(), "lo");
  }
  bool all_loopback = false;
  const std::vector<std::string> listening = ListeningAddresses(&all_loopback);
  EXPECT_GE(listening.size(), 2u);  // the two gRPC ports, at least
  EXPECT_TRUE(all_loopback) << "listening on: " << absl::StrJoin(listening, ", ");

  auto p = *Client::Connect((*prefill)->listen_address());
  auto d = *Client::Connect((*decode)->listen_address());
  auto pns = p->OpenNamespace(Spec());
  ASSERT_TRUE(pns.ok()) << pns.status();
  ASSERT_TRUE(d->OpenNamespace(Spec()).ok());
  ASSERT_TRUE(
      p->Put(pns->id, {"a", "b"}, {std::string(kBlock, 'a'), std::string(kBlock, 'b')}).ok());
  auto r = p->Transfer(pns->id, {"a", "b"}, (*decode)->listen_address(), TransferDirection::kPush);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& b : r->blocks) EXPECT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(r->lanes, "tcp/lo");
  const std::vector<PeerStats> peers = (*prefill)->peer_transfer().Peers();
  ASSERT_EQ(peers.size(), 1u);
  for (absl::string_view lane : absl::StrSplit(peers[0].lanes, ',')) {
    EXPECT_TRUE(absl::EndsWith(lane, "/lo")) << peers[0].lanes;
  }
  // Still on loopback once the endpoints are wired up.
  ListeningAddresses(&all_loopback);
  EXPECT_TRUE(all_loopback);
}

// (c): a receiver with peer transfer on (an in-process loopback transport,
// authentication off). The caller stages blocks, writes none of their
// bytes and commits claiming the checksum of what the slot held.
class UnearnedCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonConfig c = SmallDefaultConfig();
    c.peer_role = "decode";
    DaemonSeams seams;
    seams.transport = std::make_unique<LoopbackTransport>();
    auto d = Daemon::Start(c, std::move(seams));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    client_ = *Client::Connect(daemon_->listen_address());
    auto ns = client_->OpenNamespace(Spec());
    ASSERT_TRUE(ns.ok()) << ns.status();
    ns_ = ns->id;
    peer_ = PeerStub(daemon_->listen_address());
  }

  // Stages one root block; returns its slot address (0 on failure).
  uint64_t StageOne(const std::string& key, uint64_t checksum, std::string* stage_id) {
    grpc::ClientContext ctx;
    v1::StageRequest req;
    req.set_namespace_id(ns_);
    v1::PeerBlock* b = req.add_blocks();
    b->set_key(key);
    b->set_size_bytes(kBlock);
    b->set_checksum(checksum);
    req.set_ttl_ms(60'000);
    v1::StageResponse resp;
    const grpc::Status s = peer_->Stage(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok() || resp.blocks_size() != 1 || resp.blocks(0).already_cached()) return 0;
    *stage_id = resp.stage_id();
    return resp.blocks(0).address();
  }

  // Commits `received` blocks; returns the first block's status code.
  absl::StatusCode Commit(const std::string& stage_id, std::string* message) {
    grpc::ClientContext ctx;
    v1::CommitRequest req;
    req.set_stage_id(stage_id);
    req.set_received(1);
    v1::CommitResponse resp;
    const grpc::Status s = peer_->Commit(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok() || resp.blocks_size() != 1) return absl::StatusCode::kInternal;
    *message = resp.blocks(0).message();
    return static_cast<absl::StatusCode>(resp.blocks(0).code());
  }

  size_t Matched(const std::string& key) {
    auto r = client_->Lookup(ns_, {key});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->matched : 1;
  }

  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<v1::Peer::Stub> peer_;
  std::string ns_;
};

TEST_F(UnearnedCommitTest, TheChecksumOfZerosDoesNotIndexAFreshSlot) {
  const std::vector<uint8_t> zeros(kBlock, 0);
  std::string stage_id;
  ASSERT_NE(StageOne("zero", Checksum64(zeros), &stage_id), 0u);
  std::string message;
  EXPECT_EQ(Commit(stage_id, &message), absl::StatusCode::kDataLoss) << message;
  EXPECT_EQ(Matched("zero"), 0u);
  auto got = client_->Get(ns_, {"zero"});
  EXPECT_FALSE(got.ok() && !got->empty() && !(*got)[0].empty());
}

TEST_F(UnearnedCommitTest, TheChecksumOfAFreedBlockDoesNotIndexItsReusedSlot) {
  // A block that really arrived: its bytes written into the slot, as the
  // sender's put would, then committed.
  std::vector<uint8_t> secret(kBlock);
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 131 + 7);
  std::string stage_id;
  const uint64_t slot = StageOne("first", Checksum64(secret), &stage_id);
  ASSERT_NE(slot, 0u);
  std::memcpy(reinterpret_cast<void*>(slot), secret.data(), secret.size());
  std::string message;
  ASSERT_EQ(Commit(stage_id, &message), absl::StatusCode::kOk) << message;
  ASSERT_EQ(Matched("first"), 1u);
  // Freed; the next stage gets the same slot, still holding those bytes
  // unless the receiver overwrote them.
  ASSERT_TRUE(client_->Delete(ns_, {"first"}).ok());
  ASSERT_EQ(Matched("first"), 0u);
  const uint64_t reused = StageOne("second", Checksum64(secret), &stage_id);
  ASSERT_EQ(reused, slot) << "the allocator did not hand out the freed slot again";
  EXPECT_NE(std::memcmp(reinterpret_cast<const void*>(reused), secret.data(), secret.size()), 0)
      << "the staged slot still holds the freed block's bytes";
  EXPECT_EQ(Commit(stage_id, &message), absl::StatusCode::kDataLoss) << message;
  EXPECT_NE(message.find("checksum"), std::string::npos) << message;
  EXPECT_EQ(Matched("second"), 0u);
  EXPECT_EQ(daemon_->peer_transfer().pending(), 0u);
}

}  // namespace
}  // namespace kvtier
