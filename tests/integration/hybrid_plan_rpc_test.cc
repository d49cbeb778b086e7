// The fetch-or-recompute plan of a hybrid namespace over gRPC: it is taken
// among the restorable cuts, each priced with what restoring it fetches from
// each tier. A gpt-oss-120b-shaped namespace (full attention and a 128-token
// window) whose first half is on the host and second half only on NVMe:
// with a slow NVMe the plan stops at the last cut the host serves whole, and
// names per group what to load for it, leased with the longest cut.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvtier/client.h"
#include "server/daemon.h"
#include "testing/test_daemon_config.h"

namespace kvtier {
namespace {

using client::Client;

constexpr uint32_t kFull = 0, kWindow = 1;
constexpr size_t kBlocks = 16;
// 2 (K, V) x 18 layers x 1 KV head x dim 64 x 16 tokens x bf16.
constexpr uint64_t kGroupBytes = 2 * 18 * 1 * 64 * 16 * 2;

class HybridPlanRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvtier-hybrid-plan-XXXXXX";
    root_ = mkdtemp(tmpl);
    std::filesystem::create_directories(root_ + "/nvme");
  }
  void TearDown() override {
    client_.reset();
    daemon_.reset();
    std::filesystem::remove_all(root_);
  }

  void Start() {
    client_.reset();
    daemon_.reset();
    DaemonConfig c = TestDaemonConfig(16ull << 20, 2ull << 20, 1ull << 20);
    c.costmodel_gpu = "h100-sxm";  // no GPU here: price recompute for an H100
    c.nvme_dirs = root_ + "/nvme";
    c.nvme_bytes_per_dir = 32ull << 20;
    c.nvme_slab_bytes = 2ull << 20;
    c.nvme_write_policy = "write_through";
    c.nvme_io_engine = "pread";
    c.nvme_admit_min_uses = 0;
    c.nvme_mover_interval_ms = 5;
    auto d = Daemon::Start(c);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    auto cl = Client::Connect(daemon_->listen_address());
    ASSERT_TRUE(cl.ok());
    client_ = std::move(*cl);
  }

  // gpt-oss-120b at TP 8: 36 layers alternating a 128-token window (even)
  // and full attention (odd), one KV head of dim 64 per rank.
  static client::NamespaceOptions Options() {
    client::NamespaceOptions o;
    o.model_id = "openai/gpt-oss-120b";
    o.cost_model = "gpt-oss-120b";
    std::vector<uint32_t> full, window;
    for (uint32_t l = 0; l < 36; ++l) (l % 2 ? full : window).push_back(l);
    o.layout = {
        36, 1, 64, "bf16",
        16, 0, 8,  {{"full_attention", full, 0, 0, 0}, {"sliding_window", window, 128, 0, 0}}};
    return o;
  }

  static std::string Bytes(uint32_t group, size_t i) {
    std::string out;
    out.resize(kGroupBytes, static_cast<char>('a' + group * 20 + i));
    return out;
  }

  std::string root_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(HybridPlanRpcTest, ASlowNvmeTailIsRecomputedFromTheLastCutTheHostServes) {
  Start();
  ASSERT_FALSE(HasFatalFailure());
  auto ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok()) << ns.status();
  ASSERT_TRUE(ns->plans_enabled) << ns->plans_note;
  // Every block of both groups: every cut 1..16 is restorable.
  std::vector<std::string> keys, data;
  client::PutOptions put;
  for (size_t i = 0; i < kBlocks; ++i) {
    keys.push_back(absl::StrCat("k", i));
    keys.push_back(absl::StrCat("k", i));
    for (uint32_t g : {kFull, kWindow}) {
      data.emplace_back();
      data.back().resize(kGroupBytes, Bytes(g, i)[0]);
    }
    put.groups.push_back(kFull);
    put.groups.push_back(kWindow);
  }
  std::vector<absl::string_view> views(data.begin(), data.end());
  ASSERT_TRUE(client_->PutBlocks(ns->id, keys, views, put).ok());
  std::vector<std::string> chain;
  for (size_t i = 0; i < kBlocks; ++i) chain.push_back(absl::StrCat("k", i));
  // Until every block is on NVMe with its catalog record; then a restart
  // leaves them all there only.
  bool persisted = false;
  for (int i = 0; i < 1000 && !persisted; ++i) {
    auto r = client_->Lookup(ns->id, chain);
    ASSERT_TRUE(r.ok());
    persisted = r->matched == kBlocks;
    for (const client::GroupLoad& g : r->groups) {
      for (bool p : g.persisted) persisted = persisted && p;
    }
    if (!persisted) usleep(10'000);
  }
  ASSERT_TRUE(persisted);
  Start();
  ASSERT_FALSE(HasFatalFailure());
  ns = client_->OpenNamespace(Options());
  ASSERT_TRUE(ns.ok()) << ns.status();
  // Reading the first 8 blocks of both groups brings them back to the host.
  const std::vector<std::string> head(chain.begin(), chain.begin() + 8);
  for (uint32_t g : {kFull, kWindow}) {
    auto got = client_->Get(ns->id, head, g);
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t i = 0; i < head.size(); ++i) ASSERT_EQ((*got)[i], Bytes(g, i));
  }

  // A 1 MB/s NVMe: fetching one block from it costs far more than
  // recomputing it, while the host's blocks are cheap.
  daemon_->cache().host_meter().Seed(50e9, 5e-6, "test");
  daemon_->cache().nvme_meter().Seed(1e6, 100e-6, "test");
  client::LookupOptions lease;
  lease.take_lease = true;
  auto r = client_->Lookup(ns->id, chain, lease);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->matched, kBlocks);
  ASSERT_TRUE(r->plan.has_value());
  // Cut 8 fetches full attention [0, 8) and the window [0, 8), all on the
  // host; cut 9 would read block 8 of both groups from NVMe.
  EXPECT_EQ(r->plan->fetch_blocks, 8u);
  ASSERT_EQ(r->plan_groups.size(), 2u);
  for (uint32_t g : {kFull, kWindow}) {
    EXPECT_EQ(r->plan_groups[g].group, g);
    EXPECT_EQ(r->plan_groups[g].first_key, 0u);
    ASSERT_EQ(r->plan_groups[g].tiers.size(), 8u);
    for (const std::string& t : r->plan_groups[g].tiers) EXPECT_EQ(t, "host");
  }
  // The longest cut's loads are listed as before: its window is [8, 16).
  ASSERT_EQ(r->groups.size(), 2u);
  EXPECT_EQ(r->groups[kWindow].first_key, 8u);
  EXPECT_EQ(r->groups[kWindow].tiers[0], "nvme");
  // The lease holds both: 16 + 8 blocks of the longest cut, the shorter
  // cut's window [0, 8) besides.
  auto released = client_->Release(r->lease_id);
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(*released, 32u);

  // A fast NVMe: the longest cut, nothing more to list.
  daemon_->cache().nvme_meter().Seed(50e9, 5e-6, "test");
  r = client_->Lookup(ns->id, chain);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->plan.has_value());
  EXPECT_EQ(r->plan->fetch_blocks, kBlocks);
  EXPECT_TRUE(r->plan_groups.empty());
  // Slow everywhere: recompute.
  daemon_->cache().host_meter().Seed(1e5, 1e-3, "test");
  daemon_->cache().nvme_meter().Seed(1e5, 1e-3, "test");
  r = client_->Lookup(ns->id, chain);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->plan.has_value());
  EXPECT_EQ(r->plan->fetch_blocks, 0u);
  EXPECT_TRUE(r->plan_groups.empty());
}

}  // namespace
}  // namespace kvtier
