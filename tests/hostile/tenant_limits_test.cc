// Hostile tenants against a shared daemon with authentication on: one tenant
// doing ordinary things to excess (half-open Put streams, lease, namespace
// and region floods, probing another tenant's namespace ids) fails only its
// own calls, and a second tenant is served throughout (issue 16, items 3, 4,
// 5 and 7; docs/security.md).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/channel.h"
#include "kvtier/client.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"
#include "testing/test_bytes.h"
#include "testing/test_daemon_config.h"

namespace kvtier {
namespace {

using client::Client;

constexpr char kAlphaToken[] = "alpha-token-0123456789";
constexpr char kBetaToken[] = "beta-token-0123456789";

// 2 * 1 layer * 1 head * 64 dim * 16 tokens * 2 bytes = 4 KiB blocks.
client::NamespaceOptions Small(const std::string& salt = "s") {
  client::NamespaceOptions o;
  o.model_id = "small-model";
  o.salt = salt;
  o.layout = {1, 1, 64, "bf16", 16, 0, 1};
  return o;
}

// 2 * 32 layers * 8 heads * 128 dim * 128 tokens * 2 bytes = 16 MiB blocks.
client::NamespaceOptions Big() {
  client::NamespaceOptions o;
  o.model_id = "big-model";
  o.layout = {32, 8, 128, "bf16", 128, 0, 1};
  return o;
}

std::vector<std::string> Keys(const std::string& tag, int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(tag, "-", i));
  return keys;
}

class TenantLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "kvtier-tenants-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream out(dir_ + "/identities.yaml");
    out << "identities:\n"
        << "  - {name: engine-a, token: " << kAlphaToken << ", tenant: alpha}\n"
        << "  - {name: engine-b, token: " << kBetaToken << ", tenant: beta}\n";
    out.close();
    ASSERT_EQ(chmod((dir_ + "/identities.yaml").c_str(), 0600), 0);
    shm_dir_ = absl::StrCat("/dev/shm/kvtier-tenants-", getpid());
    std::filesystem::create_directories(shm_dir_ + "/alpha");
    std::filesystem::create_directories(shm_dir_ + "/beta");
  }
  void TearDown() override {
    alpha_.reset();
    beta_.reset();
    daemon_.reset();
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(shm_dir_);
  }

  DaemonConfig Config() {
    DaemonConfig c = TestDaemonConfig(256ull << 20, 16ull << 20, 16ull << 20);
    c.gpu_tier = "off";
    c.peer_transport = "off";
    c.shm_dir = shm_dir_;
    c.identities_file = dir_ + "/identities.yaml";
    return c;
  }
  void Start(const DaemonConfig& config) {
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(config);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    alpha_ = Connect(kAlphaToken);
    beta_ = Connect(kBetaToken);
    ASSERT_NE(alpha_, nullptr);
    ASSERT_NE(beta_, nullptr);
  }
  std::unique_ptr<Client> Connect(const std::string& token) {
    client::ClientOptions o;
    o.credentials.token = token;
    o.timeout = absl::Seconds(20);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(daemon_->listen_address(), o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
  // Beta's ordinary work: open, put, look up and get one 4 KiB block.
  void ExpectBetaServed(const std::string& tag) {
    absl::StatusOr<client::OpenedNamespace> ns = beta_->OpenNamespace(Small("beta"));
    ASSERT_TRUE(ns.ok()) << ns.status();
    const std::vector<std::string> keys = {tag};
    const std::vector<std::string> data = {DeterministicString(tag, 4096)};
    ASSERT_TRUE(beta_->Put(ns->id, keys, data).ok()) << tag;
    absl::StatusOr<client::LookupResult> hit = beta_->Lookup(ns->id, keys);
    ASSERT_TRUE(hit.ok()) << hit.status();
    EXPECT_EQ(hit->matched, 1u);
    EXPECT_EQ(*beta_->Get(ns->id, keys), data);
  }

  std::string dir_, shm_dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Client> alpha_, beta_;
};

// Item 3: sixteen Put streams that each send one byte of a 16 MiB block and
// then stall would reserve the whole 256 MiB host tier. A tenant's open
// writes may reserve at most its share (half the tier by default), and a
// stream idle past limits.stream_idle_timeout_ms is cancelled.
TEST_F(TenantLimitsTest, HalfOpenPutStreamsDoNotStarveAnotherTenant) {
  DaemonConfig config = Config();
  config.stream_idle_timeout_ms = 3000;
  Start(config);
  absl::StatusOr<client::OpenedNamespace> big = alpha_->OpenNamespace(Big());
  ASSERT_TRUE(big.ok()) << big.status();
  ASSERT_EQ(big->block_bytes, 16ull << 20);

  Credentials alpha;
  alpha.token = kAlphaToken;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      OpenChannel(daemon_->listen_address(), alpha);
  ASSERT_TRUE(channel.ok()) << channel.status();
  std::unique_ptr<v1::KvCache::Stub> stub = v1::KvCache::NewStub(*channel);
  struct Stream {
    grpc::ClientContext context;
    v1::PutResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::PutChunk>> writer;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 16; ++i) {
    auto s = std::make_unique<Stream>();
    s->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    s->writer = stub->Put(&s->context, &s->response);
    v1::PutChunk chunk;
    chunk.set_namespace_id(big->id);
    chunk.set_key(absl::StrCat("half-open-", i));
    chunk.set_block_bytes(16u << 20);
    chunk.set_data("x");
    s->writer->Write(chunk);  // and nothing more
    streams.push_back(std::move(s));
  }
  // The daemon has seen the streams once alpha's reservations stop growing.
  const uint64_t share = config.host_tier_bytes / 2;
  uint64_t reserved = 0;
  for (int i = 0; i < 100 && reserved < share; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    reserved = daemon_->cache().UsageOf("alpha").reserved_bytes;
  }
  EXPECT_EQ(reserved, share) << "alpha's open Puts reserve exactly its share";

  // Beta is served while alpha's streams hang.
  ExpectBetaServed("while-alpha-stalls");

  // The idle streams are cancelled and give back what they reserved.
  for (int i = 0; i < 1000 && daemon_->cache().UsageOf("alpha").reserved_bytes > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(daemon_->cache().UsageOf("alpha").reserved_bytes, 0u);
  int cancelled = 0, exhausted = 0;
  for (auto& s : streams) {
    s->writer->WritesDone();
    const grpc::Status st = s->writer->Finish();
    if (st.error_code() == grpc::StatusCode::CANCELLED) ++cancelled;
    if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++exhausted;
  }
  EXPECT_EQ(cancelled, 8) << "the streams that held a reservation were cancelled as idle";
  EXPECT_EQ(exhausted, 8) << "the streams past alpha's share were refused";
  // Alpha itself can write again: a whole share's worth of whole blocks.
  const std::vector<std::string> after = Keys("after", 8);
  std::vector<std::string> data;
  for (const std::string& k : after) data.push_back(DeterministicString(k, 16u << 20));
  const absl::Status put = alpha_->Put(big->id, after, data);
  EXPECT_TRUE(put.ok()) << put;
  EXPECT_EQ(*alpha_->Get(big->id, {after[7]}), std::vector<std::string>{data[7]});
}

// Items 4 and 5: leases. Each tenant may hold a bounded number of leases and
// pin a bounded number of blocks with them (a lease costs memory per block);
// a flood by one tenant leaves the others' leases alone.
TEST_F(TenantLimitsTest, LeaseFloodIsBoundedPerTenant) {
  DaemonConfig config = Config();
  config.max_leases = 64;
  config.tenant_max_leases = 8;
  config.tenant_max_lease_blocks = 40;
  Start(config);
  absl::StatusOr<client::OpenedNamespace> a = alpha_->OpenNamespace(Small("alpha"));
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<std::string> keys = Keys("a", 16);
  std::vector<std::string> data;
  for (const std::string& k : keys) data.push_back(DeterministicString(k, 4096));
  ASSERT_TRUE(alpha_->Put(a->id, keys, data).ok());
  client::LookupOptions leased;
  leased.take_lease = true;
  // Two leases of 16 blocks pin 32; a third would pass 40 blocks.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(alpha_->Lookup(a->id, keys, leased).ok());
  absl::StatusOr<client::LookupResult> refused = alpha_->Lookup(a->id, keys, leased);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("tenant_max_lease_blocks"), std::string::npos)
      << refused.status();
  // One-block leases: the count limit (8 in all) stops alpha at 6 more.
  int taken = 0;
  for (int i = 0; i < 20; ++i) {
    if (alpha_->Lookup(a->id, {keys[0]}, leased).ok()) ++taken;
  }
  EXPECT_EQ(taken, 6);
  EXPECT_EQ(daemon_->cache().UsageOf("alpha").leases, 8u);
  EXPECT_EQ(daemon_->cache().UsageOf("alpha").lease_blocks, 38u);
  // Beta leases as it likes.
  absl::StatusOr<client::OpenedNamespace> b = beta_->OpenNamespace(Small("beta"));
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(beta_->Put(b->id, {"b0"}, {DeterministicString("b0", 4096)}).ok());
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<client::LookupResult> l = beta_->Lookup(b->id, {"b0"}, leased);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_FALSE(l->lease_id.empty());
  }
}

// Item 5: namespaces. One tenant opening namespaces until refused stops at
// its share; the other still opens, and a closed namespace frees its place
// (CloseNamespace, which did not exist: the denial lasted until restart).
TEST_F(TenantLimitsTest, NamespaceFloodIsBoundedAndNamespacesClose) {
  DaemonConfig config = Config();
  config.max_namespaces = 8;
  config.tenant_max_namespaces = 4;
  Start(config);
  std::vector<std::string> opened;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<client::OpenedNamespace> ns = alpha_->OpenNamespace(Small(absl::StrCat(i)));
    if (!ns.ok()) {
      EXPECT_EQ(ns.status().code(), absl::StatusCode::kResourceExhausted);
      break;
    }
    opened.push_back(ns->id);
  }
  EXPECT_EQ(opened.size(), 4u);
  ExpectBetaServed("beta-after-namespace-flood");

  // Closing frees the place; the closed namespace serves nothing.
  ASSERT_TRUE(alpha_->Put(opened[0], {"k"}, {DeterministicString("k", 4096)}).ok());
  client::LookupOptions leased;
  leased.take_lease = true;
  ASSERT_TRUE(alpha_->Lookup(opened[0], {"k"}, leased).ok());
  absl::StatusOr<client::CloseNamespaceResult> closed =
      alpha_->CloseNamespace(opened[0], /*drop_blocks=*/true);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->leases_released, 1u);
  EXPECT_EQ(closed->blocks_dropped, 1u);
  EXPECT_EQ(closed->blocks_kept, 0u);
  EXPECT_EQ(alpha_->Lookup(opened[0], {"k"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(alpha_->CloseNamespace(opened[0]).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(alpha_->OpenNamespace(Small("fresh")).ok());
  // Beta cannot close alpha's namespace (and learns nothing from trying).
  EXPECT_EQ(beta_->CloseNamespace(opened[1]).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(alpha_->Lookup(opened[1], {"k"}).ok());
  // Re-opening a closed namespace without dropping serves its blocks again.
  ASSERT_TRUE(alpha_->Put(opened[1], {"kept"}, {DeterministicString("kept", 4096)}).ok());
  absl::StatusOr<client::CloseNamespaceResult> kept = alpha_->CloseNamespace(opened[1]);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->blocks_kept, 1u);
  absl::StatusOr<client::OpenedNamespace> again = alpha_->OpenNamespace(Small("1"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id, opened[1]);
  EXPECT_EQ(*alpha_->Get(opened[1], {"kept"}),
            std::vector<std::string>{DeterministicString("kept", 4096)});
}

// Item 5: memory regions. A tenant registering regions until refused stops
// at its share; the other tenant still registers.
TEST_F(TenantLimitsTest, RegionFloodIsBoundedPerTenant) {
  DaemonConfig config = Config();
  config.max_regions = 8;
  config.tenant_max_regions = 3;
  Start(config);
  auto make_file = [](const std::string& path) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
    close(fd);
  };
  int registered = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string path = absl::StrCat(shm_dir_, "/alpha/r", i);
    make_file(path);
    absl::StatusOr<std::string> r = alpha_->RegisterMemory(path, 1 << 16, 0);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
      break;
    }
    ++registered;
  }
  EXPECT_EQ(registered, 3);
  const std::string path = shm_dir_ + "/beta/r";
  make_file(path);
  absl::StatusOr<std::string> r = beta_->RegisterMemory(path, 1 << 16, 0);
  EXPECT_TRUE(r.ok()) << r.status();
}

// Item 7: a namespace id is a public hash, so a tenant can compute another
// tenant's ids offline. Naming one must answer exactly as for an id nobody
// opened: the same code and the same message, for every namespaced RPC.
TEST_F(TenantLimitsTest, AnotherTenantsNamespaceReadsAsNotOpen) {
  Start(Config());
  absl::StatusOr<client::OpenedNamespace> a = alpha_->OpenNamespace(Small("alpha"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(alpha_->Put(a->id, {"k"}, {DeterministicString("k", 4096)}).ok());
  // What beta would compute for a model nobody serves.
  NamespaceSpec nobody;
  nobody.model_id = "not-served-anywhere";
  nobody.layout = {1, 1, 64, DType::kBf16, 16, 0, 1};
  nobody.tenant = "alpha";
  const std::string absent = NamespaceId::Of(nobody).ToHex();
  // Beta's own region, so that Save and Load reach the namespace check.
  const std::string path = shm_dir_ + "/beta/oracle";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
  close(fd);
  absl::StatusOr<std::string> region = beta_->RegisterMemory(path, 1 << 16, 0);
  ASSERT_TRUE(region.ok()) << region.status();
  const std::vector<client::RegionBlockRef> refs = {{"k", "", 0, 4096, {}}};
  auto ignore = [](const client::BlockCompletion&) {};
  auto answer = [&](const std::string& ns) {
    std::vector<std::string> seen;
    for (absl::Status s :
         {beta_->Lookup(ns, {"k"}).status(), beta_->Get(ns, {"k"}).status(),
          beta_->Put(ns, {"k2"}, {DeterministicString("k2", 4096)}, "k"),
          beta_->Delete(ns, {"k"}).status(), beta_->CloseNamespace(ns).status(),
          beta_->Save(ns, *region, refs, ignore), beta_->Load(ns, *region, refs, ignore),
          beta_->Transfer(ns, {"k"}, "127.0.0.1:1", client::TransferDirection::kPush).status()}) {
      // The id itself is in the message; the rest must not differ.
      std::string text(s.message());
      for (size_t at; (at = text.find(ns)) != std::string::npos;) text.replace(at, ns.size(), "ID");
      seen.push_back(absl::StrCat(absl::StatusCodeToString(s.code()), ": ", text));
    }
    return seen;
  };
  const std::vector<std::string> for_alphas = answer(a->id);
  const std::vector<std::string> for_absent = answer(absent);
  EXPECT_EQ(for_alphas, for_absent);
  for (const std::string& s : for_alphas) EXPECT_EQ(s.rfind("NOT_FOUND", 0), 0u) << s;
  // And alpha's block is untouched.
  EXPECT_EQ(alpha_->Lookup(a->id, {"k"})->matched, 1u);
}

}  // namespace
}  // namespace kvtier
