// PeerTransferRpcTest: two real daemons linked over UCX on loopback
// (UCX_NET_DEVICES=lo, UCX_TLS=tcp), a prefill one and a decode one, and a
// kvtierd in its own process (ChildDaemon) to stop or kill. Test-only.
#ifndef KVTIER_TESTS_INTEGRATION_PEER_TRANSFER_RPC_FIXTURE_H_
#define KVTIER_TESTS_INTEGRATION_PEER_TRANSFER_RPC_FIXTURE_H_

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
#include "testing/test_bytes.h"
#include "testing/test_daemon_config.h"
#include "transfer/transport_factory.h"

#ifndef KVTIERD_BINARY
#error "KVTIERD_BINARY must name the kvtierd executable"
#endif

namespace kvtier {

inline constexpr uint64_t kBlock = 64 * 1024;

inline std::vector<std::string> NumberedKeys(const std::string& prefix, int n) {
  std::vector<std::string> k;
  for (int i = 0; i < n; ++i) k.push_back(absl::StrCat(prefix, "-", i));
  return k;
}

// Same spec on both daemons, so the same namespace id. 64 KiB blocks:
// 2 * 2 layers * 2 heads * 128 dim * 32 tokens * 2 bytes.
inline client::NamespaceOptions Spec(uint32_t tokens = 32) {
  client::NamespaceOptions o;
  o.model_id = "pd-model";
  o.layout = {2, 2, 128, "bf16", tokens, 0, 1};
  return o;
}

inline DaemonConfig PeerDaemonConfig(const std::string& role) {
  DaemonConfig c = TestDaemonConfig(64ull << 20, 1ull << 20, 1ull << 20);
  c.costmodel_gpu = "h100-sxm";
  c.gpu_tier = "off";
  c.peer_role = role;
  c.peer_timeout_ms = 5000;
  return c;
}

inline int FreePort() {
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

// Starts the child daemon, connects `out` to it and opens the test
// namespace there, retrying while it comes up; returns the namespace id.
inline absl::StatusOr<std::string> StartAndOpen(ChildDaemon& child,
                                                std::unique_ptr<client::Client>* out) {
  child.Start();
  *out = *client::Client::Connect(child.address());
  absl::StatusOr<client::OpenedNamespace> ns;
  for (int i = 0; i < 300; ++i) {
    if (ns = (*out)->OpenNamespace(Spec()); ns.ok()) break;
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
    auto d = Daemon::Start(PeerDaemonConfig(role), std::move(seams));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  void SetUp() override {
    prefill_ = StartWithFaults("prefill", &faults_);
    decode_ = StartWithFaults("decode", &decode_faults_);
    ASSERT_TRUE(prefill_ != nullptr && decode_ != nullptr);
    pc_ = *client::Client::Connect(prefill_->listen_address());
    dc_ = *client::Client::Connect(decode_->listen_address());
    auto pns = pc_->OpenNamespace(Spec());
    ASSERT_TRUE(pns.ok()) << pns.status();
    auto dns = dc_->OpenNamespace(Spec());
    ASSERT_TRUE(dns.ok()) << dns.status();
    ASSERT_EQ(pns->id, dns->id);
    ns_ = pns->id;
  }

  std::vector<std::string> PutChain(client::Client& c, const std::vector<std::string>& keys) {
    std::vector<std::string> data;
    for (const std::string& k : keys) data.push_back(DeterministicString(ns_ + k, kBlock));
    EXPECT_TRUE(c.Put(ns_, keys, data).ok());
    return data;
  }

  size_t Matched(client::Client& c, const std::vector<std::string>& keys) {
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
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ((*got)[i], DeterministicString(ns_ + keys[i], kBlock)) << i;
  }

  static size_t LeadingOk(const client::TransferResult& r) {
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
  std::unique_ptr<client::Client> pc_, dc_;
  std::string ns_;
};

}  // namespace kvtier

#endif  // KVTIER_TESTS_INTEGRATION_PEER_TRANSFER_RPC_FIXTURE_H_
