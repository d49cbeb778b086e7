// Security of a real daemon over gRPC: bearer tokens, TLS and mutual TLS
// (certificates made by deploy/make-certs.sh), roles (Admin and Peer RPCs
// are refused to tenants), and tenant isolation: two tenants sending the
// same model, layout, salt and keys get different namespaces, never see each
// other's blocks (host tier, and NVMe after a restart), and cannot use each
// other's namespace ids or memory regions.
#include <fcntl.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/channel.h"
#include "kvtier/client.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "kvtier/v1/peer.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/rpc_roles.h"
#include "testing/test_bytes.h"
#include "testing/test_daemon_config.h"

#ifndef KVTIER_SOURCE_DIR
#error "KVTIER_SOURCE_DIR must name the source tree"
#endif

namespace kvtier {
namespace {

using client::Client;

constexpr char kAlphaToken[] = "alpha-token-0123456789";
constexpr char kBetaToken[] = "beta-token-0123456789";
constexpr char kAdminToken[] = "admin-token-0123456789";
constexpr char kPeerToken[] = "peer-token-0123456789";

// 2 * 1 layer * 1 head * 64 dim * 16 tokens * 2 bytes = 4 KiB blocks.
client::NamespaceOptions Spec() {
  client::NamespaceOptions o;
  o.model_id = "shared-model";
  o.salt = "same-salt";
  o.layout = {1, 1, 64, "bf16", 16, 0, 1};
  return o;
}

class SecurityRpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(absl::StrCat(::testing::TempDir(), "kvtier-security-", getpid()));
    std::filesystem::remove_all(*dir_);
    std::filesystem::create_directories(*dir_);
    const std::string make = absl::StrCat(KVTIER_SOURCE_DIR, "/deploy/make-certs.sh");
    ASSERT_EQ(std::system(absl::StrCat("bash ", make, " ", *dir_, "/pki engine-a stranger ops",
                                       " > /dev/null")
                              .c_str()),
              0);
    // A second CA, whose "engine-a" certificate must not pass.
    ASSERT_EQ(
        std::system(absl::StrCat("bash ", make, " ", *dir_, "/rogue engine-a > /dev/null").c_str()),
        0);
    std::ofstream out(Path("identities.yaml"));
    out << "identities:\n"
        << "  - {name: engine-a, token: " << kAlphaToken << ", tenant: alpha}\n"
        << "  - {name: engine-b, token: " << kBetaToken << ", tenant: beta}\n"
        << "  - {name: ops, token: " << kAdminToken << ", role: admin}\n"
        << "  - {name: decode, token: " << kPeerToken << ", role: peer}\n"
        << "  - {subject: engine-a, tenant: alpha}\n"
        << "  - {subject: ops, role: admin}\n";
    out.close();
    ASSERT_EQ(chmod(Path("identities.yaml").c_str(), 0600), 0);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string Path(const std::string& name) { return absl::StrCat(*dir_, "/", name); }

  static DaemonConfig Config() {
    DaemonConfig c = TestDaemonConfig(8ull << 20, 1ull << 20, 1ull << 20);
    c.gpu_tier = "off";
    c.peer_transport = "off";
    c.identities_file = Path("identities.yaml");
    return c;
  }
  static DaemonConfig MutualTlsConfig() {
    DaemonConfig c = Config();
    c.tls_cert = Path("pki/server.pem");
    c.tls_key = Path("pki/server.key");
    c.tls_client_ca = Path("pki/ca.pem");
    return c;
  }

  void StartDaemon(const DaemonConfig& config) {
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(config);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }

  std::unique_ptr<Client> ClientWith(const Credentials& credentials) {
    client::ClientOptions o;
    o.credentials = credentials;
    o.timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(daemon_->listen_address(), o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  static Credentials Token(const std::string& token) {
    Credentials c;
    c.token = token;
    return c;
  }
  static Credentials Tls(const std::string& pki, const std::string& name, std::string token = "") {
    Credentials c;
    c.tls_ca_file = Path("pki/ca.pem");
    if (!name.empty()) {
      c.tls_cert_file = Path(absl::StrCat(pki, "/", name, ".pem"));
      c.tls_key_file = Path(absl::StrCat(pki, "/", name, ".key"));
    }
    c.token = std::move(token);
    return c;
  }

  grpc::StatusCode AdminCode(const Credentials& credentials) {
    auto channel = OpenChannel(daemon_->listen_address(), credentials);
    EXPECT_TRUE(channel.ok());
    auto stub = v1::Admin::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetStatusResponse r;
    return stub->GetStatus(&ctx, v1::GetStatusRequest(), &r).error_code();
  }
  grpc::StatusCode PeerHelloCode(const Credentials& credentials) {
    auto channel = OpenChannel(daemon_->listen_address(), credentials);
    EXPECT_TRUE(channel.ok());
    auto stub = v1::Peer::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::HelloRequest req;
    req.set_daemon_id("probe");
    v1::HelloResponse r;
    return stub->Hello(&ctx, req, &r).error_code();
  }

  static std::string* dir_;
  std::unique_ptr<Daemon> daemon_;
};

std::string* SecurityRpcTest::dir_ = nullptr;

TEST_F(SecurityRpcTest, MissingOrWrongTokensAreUnauthenticated) {
  StartDaemon(Config());
  for (const std::string& token : {std::string(), std::string("not-a-known-token-at-all")}) {
    std::unique_ptr<Client> c = ClientWith(Token(token));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->OpenNamespace(Spec()).status().code(), absl::StatusCode::kUnauthenticated)
        << "token '" << token << "'";
    EXPECT_EQ(AdminCode(Token(token)), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(PeerHelloCode(Token(token)), grpc::StatusCode::UNAUTHENTICATED);
  }
  // Nothing was opened by the refused calls.
  EXPECT_EQ(daemon_->cache().Namespaces().size(), 0u);
}

TEST_F(SecurityRpcTest, RolesGateTheAdminAndPeerServices) {
  DaemonConfig config = Config();
  config.metrics_listen = "127.0.0.1:0";  // RPC metrics are recorded when served
  StartDaemon(config);
  EXPECT_EQ(AdminCode(Token(kAlphaToken)), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(AdminCode(Token(kPeerToken)), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(AdminCode(Token(kAdminToken)), grpc::StatusCode::OK);
  // The Peer service hands out the arena's remote key: tenants may not call it.
  EXPECT_EQ(PeerHelloCode(Token(kAlphaToken)), grpc::StatusCode::PERMISSION_DENIED);
  // A peer gets through to the Peer service, which answers that this daemon
  // has no transport (peer.transport is off here).
  EXPECT_EQ(PeerHelloCode(Token(kPeerToken)), grpc::StatusCode::UNAVAILABLE);
  // A peer or a tenant-less admin has no namespaces of its own.
  for (const char* token : {kPeerToken, kAdminToken}) {
    std::unique_ptr<Client> c = ClientWith(Token(token));
    EXPECT_EQ(c->OpenNamespace(Spec()).status().code(), absl::StatusCode::kPermissionDenied);
  }
  // The RPC metrics name the tenant from the identity, and count refusals.
  ASSERT_TRUE(ClientWith(Token(kAlphaToken))->OpenNamespace(Spec()).ok());
  EXPECT_EQ(AdminCode(Token("no-such-token-anywhere")), grpc::StatusCode::UNAUTHENTICATED);
  const std::string metrics = daemon_->metrics().Render();
  EXPECT_NE(
      metrics.find(
          "{code=\"OK\",method=\"OpenNamespace\",service=\"kvtier.v1.KvCache\",tenant=\"alpha\"}"),
      std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("{code=\"UNAUTHENTICATED\",method=\"GetStatus\",service=\"kvtier.v1.Admin\","
                   "tenant=\"unauthenticated\"}"),
      std::string::npos);
  EXPECT_NE(metrics.find("kvtier_tenant_namespaces{tenant=\"alpha\"} 1"), std::string::npos);
}

// Every RPC of the three services, found from their descriptors (so a new
// RPC is covered without touching this test), admits its caller before it
// does anything: no credential or an unknown token is UNAUTHENTICATED, a
// known caller of the wrong role PERMISSION_DENIED. Each call is one empty
// message on a generic stream, which every handler kind accepts on the wire.
TEST_F(SecurityRpcTest, EveryRpcAdmitsItsCallerFirst) {
  StartDaemon(Config());
  grpc::CompletionQueue cq;
  // The status of `method` called with `token` ("" sends none).
  auto call = [&](const std::string& method, const std::string& token) {
    auto channel = OpenChannel(daemon_->listen_address(), Token(token));
    EXPECT_TRUE(channel.ok()) << channel.status();
    grpc::GenericStub stub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> rw = stub.PrepareCall(&ctx, method, &cq);
    auto step = [&](auto&& start) {
      void* tag = nullptr;
      bool ok = false;
      start(reinterpret_cast<void*>(&tag));
      EXPECT_TRUE(cq.Next(&tag, &ok));
      return ok;
    };
    grpc::Slice nothing;
    grpc::ByteBuffer empty(&nothing, 1);
    if (step([&](void* t) { rw->StartCall(t); }) && step([&](void* t) { rw->Write(empty, t); })) {
      step([&](void* t) { rw->WritesDone(t); });
    }
    grpc::ByteBuffer reply;  // drained, so that Finish reports the status
    while (step([&](void* t) { rw->Read(&reply, t); })) {
    }
    grpc::Status status;
    step([&](void* t) { rw->Finish(&status, t); });
    return status;
  };
  // A known caller who lacks `role`.
  auto wrong_role = [](Role role) { return role == Role::kTenant ? kPeerToken : kAlphaToken; };
  size_t methods = 0;
  for (const std::string_view service : {"KvCache", "Admin", "Peer"}) {
    const std::string full = std::string(kRpcPackage) + "." + std::string(service);
    const google::protobuf::ServiceDescriptor* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(full);
    ASSERT_NE(descriptor, nullptr) << full;
    for (int i = 0; i < descriptor->method_count(); ++i) {
      const std::string name = descriptor->method(i)->name();
      const auto entry =
          std::find_if(std::begin(kRpcRoles), std::end(kRpcRoles),
                       [&](const RpcRole& r) { return r.service == service && r.method == name; });
      ASSERT_NE(entry, std::end(kRpcRoles)) << full << "/" << name << " has no role";
      const std::string method = absl::StrCat("/", full, "/", name);
      SCOPED_TRACE(method);
      for (const std::string& token : {std::string(), std::string("not-a-known-token-at-all")}) {
        const grpc::Status s = call(method, token);
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << "token '" << token << "': " << s.error_message();
      }
      const grpc::Status s = call(method, wrong_role(entry->role));
      EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
      ++methods;
    }
  }
  EXPECT_EQ(methods, std::size(kRpcRoles));
  // Nothing was opened by the refused calls.
  EXPECT_EQ(daemon_->cache().Namespaces().size(), 0u);
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
}

// Two tenants, identical requests: separate namespaces, separate bytes, in
// host memory and on NVMe after a restart; neither can use the other's
// namespace id, whatever RPC it tries.
TEST_F(SecurityRpcTest, TenantsWithIdenticalKeysNeverSeeEachOthersBlocks) {
  DaemonConfig config = Config();
  const std::string nvme = Path("nvme");
  std::filesystem::create_directories(nvme);
  config.nvme_dirs = nvme;
  config.nvme_bytes_per_dir = 8ull << 20;
  config.nvme_slab_bytes = 2ull << 20;
  config.nvme_write_policy = "write_through";
  config.nvme_io_engine = "pread";
  config.nvme_admit_min_uses = 0;
  config.nvme_mover_interval_ms = 10;
  config.shm_dir = absl::StrCat("/dev/shm/kvtier-security-", getpid());
  std::filesystem::create_directories(config.shm_dir + "/alpha");
  std::filesystem::create_directories(config.shm_dir + "/beta");
  StartDaemon(config);
  std::unique_ptr<Client> alpha = ClientWith(Token(kAlphaToken));
  std::unique_ptr<Client> beta = ClientWith(Token(kBetaToken));
  absl::StatusOr<client::OpenedNamespace> a = alpha->OpenNamespace(Spec());
  absl::StatusOr<client::OpenedNamespace> b = beta->OpenNamespace(Spec());
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_NE(a->id, b->id);
  const std::vector<std::string> keys = {"k0", "k1", "k2"};
  std::vector<std::string> a_data, b_data;
  for (const std::string& k : keys) {
    a_data.push_back(DeterministicString("alpha" + k, 4096));
    b_data.push_back(DeterministicString("beta" + k, 4096));
  }
  ASSERT_TRUE(alpha->Put(a->id, keys, a_data).ok());
  // Beta's identical request finds nothing: no hit, no timing difference.
  absl::StatusOr<client::LookupResult> seen = beta->Lookup(b->id, keys);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->matched, 0u);
  ASSERT_TRUE(beta->Put(b->id, keys, b_data).ok());
  EXPECT_EQ(*alpha->Get(a->id, keys), a_data);
  EXPECT_EQ(*beta->Get(b->id, keys), b_data);

  // Beta naming alpha's namespace id is refused by every namespaced RPC as
  // if it were not open (no oracle), and changes nothing.
  const auto refused = absl::StatusCode::kNotFound;
  EXPECT_EQ(beta->Lookup(a->id, keys).status().code(), refused);
  EXPECT_EQ(beta->Get(a->id, keys).status().code(), refused);
  EXPECT_EQ(beta->Put(a->id, {"k3"}, {b_data[0]}, "k2").code(), refused);
  EXPECT_EQ(beta->Delete(a->id, keys, true).status().code(), refused);
  EXPECT_EQ(
      beta->Transfer(a->id, keys, "127.0.0.1:1", client::TransferDirection::kPush).status().code(),
      refused);
  EXPECT_EQ(beta->Load(a->id, "r0000000000000000", {{keys[0], "", 0, 4096, {}}},
                       [](const client::BlockCompletion&) {})
                .code(),
            refused);
  EXPECT_EQ(alpha->Lookup(a->id, keys)->matched, 3u);
  EXPECT_EQ(*alpha->Get(a->id, keys), a_data);

  // A lease belongs to its tenant: another cannot release it.
  client::LookupOptions leased;
  leased.take_lease = true;
  absl::StatusOr<client::LookupResult> lease = alpha->Lookup(a->id, keys, leased);
  ASSERT_TRUE(lease.ok() && !lease->lease_id.empty());
  EXPECT_EQ(beta->Release(lease->lease_id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*alpha->Release(lease->lease_id), 3u);

  // Shared memory: each tenant registers files only from shm_dir/TENANT, and
  // a region belongs to the tenant that registered it.
  auto make_file = [](const std::string& path) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
    close(fd);
  };
  const std::string alpha_file = config.shm_dir + "/alpha/engine.buf";
  const std::string beta_file = config.shm_dir + "/beta/engine.buf";
  const std::string shared_file = config.shm_dir + "/engine.buf";
  make_file(alpha_file);
  make_file(beta_file);
  make_file(shared_file);
  EXPECT_EQ(beta->RegisterMemory(alpha_file, 1 << 20, 0).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(beta->RegisterMemory(shared_file, 1 << 20, 0).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<std::string> region = alpha->RegisterMemory(alpha_file, 1 << 20, 0);
  ASSERT_TRUE(region.ok()) << region.status();
  absl::StatusOr<std::string> beta_region = beta->RegisterMemory(beta_file, 1 << 20, 0);
  ASSERT_TRUE(beta_region.ok()) << beta_region.status();
  EXPECT_EQ(beta->Load(b->id, *region, {{keys[0], "", 0, 4096, {}}},
                       [](const client::BlockCompletion&) {})
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(beta->Save(a->id, *beta_region, {{"k9", "k2", 0, 4096, {}}},
                       [](const client::BlockCompletion&) {})
                .code(),
            refused);
  EXPECT_EQ(beta->UnregisterMemory(*region).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(alpha->UnregisterMemory(*region).ok());
  EXPECT_TRUE(beta->UnregisterMemory(*beta_region).ok());
  EXPECT_EQ(alpha->Lookup(a->id, {"k0", "k1", "k2", "k9"})->matched, 3u);  // nothing saved

  // Restart on the same NVMe directory once both tenants' blocks are
  // persisted: the blocks come back from NVMe, and each tenant still gets
  // only its own bytes.
  auto persisted = [&](Client& c, const std::string& ns) {
    absl::StatusOr<client::LookupResult> r = c.Lookup(ns, keys);
    return r.ok() && r->matched == keys.size() &&
           std::all_of(r->persisted.begin(), r->persisted.end(), [](bool p) { return p; });
  };
  for (int i = 0; i < 500 && !(persisted(*alpha, a->id) && persisted(*beta, b->id)); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(persisted(*alpha, a->id) && persisted(*beta, b->id));
  alpha.reset();
  beta.reset();
  daemon_.reset();
  StartDaemon(config);
  alpha = ClientWith(Token(kAlphaToken));
  beta = ClientWith(Token(kBetaToken));
  ASSERT_EQ(alpha->OpenNamespace(Spec())->id, a->id);
  ASSERT_EQ(beta->OpenNamespace(Spec())->id, b->id);
  absl::StatusOr<client::LookupResult> from_nvme = alpha->Lookup(a->id, keys);
  ASSERT_TRUE(from_nvme.ok()) << from_nvme.status();
  ASSERT_EQ(from_nvme->matched, 3u);
  // Recovered from the catalog: each block on NVMe and persisted (the C++
  // client reads them from the compact reply).
  EXPECT_EQ(from_nvme->tiers, std::vector<std::string>(3, "nvme"));
  EXPECT_EQ(from_nvme->persisted, std::vector<bool>(3, true));
  EXPECT_EQ(*alpha->Get(a->id, keys), a_data);
  EXPECT_EQ(*beta->Get(b->id, keys), b_data);
  EXPECT_EQ(beta->Get(a->id, keys).status().code(), refused);
  std::filesystem::remove_all(config.shm_dir);
}

TEST_F(SecurityRpcTest, MutualTlsNamesTheTenantByCertificate) {
  StartDaemon(MutualTlsConfig());
  // engine-a's certificate is tenant alpha.
  std::unique_ptr<Client> a = ClientWith(Tls("pki", "engine-a"));
  absl::StatusOr<client::OpenedNamespace> ns = a->OpenNamespace(Spec());
  ASSERT_TRUE(ns.ok()) << ns.status();
  // Same tenant by token over TLS without a client certificate: same
  // namespace.
  std::unique_ptr<Client> by_token = ClientWith(Tls("pki", "", kAlphaToken));
  EXPECT_EQ(by_token->OpenNamespace(Spec())->id, ns->id);
  // A valid certificate that is no identity, or no credential at all.
  EXPECT_EQ(ClientWith(Tls("pki", "stranger"))->OpenNamespace(Spec()).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ClientWith(Tls("pki", ""))->OpenNamespace(Spec()).status().code(),
            absl::StatusCode::kUnauthenticated);
  // Admin by certificate; tenants' certificates may not administer.
  EXPECT_EQ(AdminCode(Tls("pki", "ops")), grpc::StatusCode::OK);
  EXPECT_EQ(AdminCode(Tls("pki", "engine-a")), grpc::StatusCode::PERMISSION_DENIED);
  // "engine-a" signed by another CA does not get through the handshake.
  Credentials rogue = Tls("rogue", "engine-a");
  EXPECT_FALSE(ClientWith(rogue)->OpenNamespace(Spec()).ok());
  // Nor does a plaintext client.
  client::ClientOptions plain;
  plain.timeout = absl::Seconds(5);
  EXPECT_EQ(
      (*Client::Connect(daemon_->listen_address(), plain))->OpenNamespace(Spec()).status().code(),
      absl::StatusCode::kUnavailable);
}

TEST_F(SecurityRpcTest, BadSecurityConfigFailsTheStart) {
  DaemonConfig c = MutualTlsConfig();
  c.tls_cert = Path("pki/missing.pem");
  EXPECT_EQ(Daemon::Start(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = Config();
  c.identities_file = Path("nothing-here.yaml");
  EXPECT_EQ(Daemon::Start(c).status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(chmod(Path("identities.yaml").c_str(), 0640), 0);
  EXPECT_EQ(Daemon::Start(Config()).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(chmod(Path("identities.yaml").c_str(), 0600), 0);
  c = Config();
  c.tls_key = "";
  c.tls_cert = Path("pki/server.pem");
  EXPECT_EQ(Daemon::Start(c).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvtier
