#include "server/lookup_planner.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/clock.h"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Llama-3.2-1B on one rank: 2 * 16 layers * 8 KV heads * 64 * 2 bytes * 16
// tokens = 256 KiB per block.
NamespaceSpec Spec1b() {
  NamespaceSpec s;
  s.model_id = "meta-llama/Llama-3.2-1B";
  s.layout = KvLayout{16, 8, 64, DType::kBf16, 16, 0, 1};
  return s;
}

BlockKey Key(int i) { return *BlockKey::Create("k" + std::to_string(i)); }

class LookupPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeCache(std::nullopt); }
  void TearDown() override {
    cache_.reset();
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  void MakeCache(std::optional<NvmeTierOptions> nvme) {
    cache_.reset();
    BlockCacheOptions o;
    o.host_bytes = 16 * kMiB;
    o.slab_bytes = 4 * kMiB;
    o.max_block_bytes = 1 * kMiB;
    o.nvme = nvme;
    auto c = BlockCache::Create(o, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    cache_ = std::move(*c);
    ns_ = cache_->OpenNamespace(Spec1b())->id;
  }

  std::unique_ptr<LookupPlanner> Planner(const std::string& gpu = "h100-sxm") {
    PlannerOptions o;
    o.gpu = gpu;
    auto p = LookupPlanner::Create(o, GpuInventory{{}, "no GPU (test)"}, cache_.get());
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? std::move(*p) : nullptr;
  }

  void PutChain(int n) {
    auto batch = cache_->BeginPut(ns_);
    ASSERT_TRUE(batch.ok());
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE((*batch)->StartBlock(Key(i), i ? Key(i - 1) : BlockKey(), 256 * 1024).ok());
      ASSERT_TRUE((*batch)->Append(std::vector<uint8_t>(256 * 1024, static_cast<uint8_t>(i))).ok());
    }
    ASSERT_TRUE((*batch)->Commit().ok());
  }

  std::vector<MatchedBlock> Match(int n) {
    std::vector<BlockKey> keys;
    for (int i = 0; i < n; ++i) keys.push_back(Key(i));
    auto r = cache_->Lookup(ns_, keys, false, absl::ZeroDuration());
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->blocks : std::vector<MatchedBlock>{};
  }

  FakeClock clock_;
  std::string root_;
  std::unique_ptr<BlockCache> cache_;
  NamespaceId ns_;
};

TEST_F(LookupPlannerTest, GpuChoice) {
  PlannerOptions o;
  auto off = LookupPlanner::Create(o, GpuInventory{{}, "no GPU (no driver)"}, cache_.get());
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE((*off)->Snapshot().enabled);
  EXPECT_NE((*off)->Snapshot().note.find("costmodel.gpu"), std::string::npos);
  auto detected = LookupPlanner::Create(o, GpuInventory{{GpuDevice{0, "NVIDIA H200", 0}}, "1 GPU"},
                                        cache_.get());
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ((*detected)->Snapshot().gpu, "h200");
  o.gpu = "tpu-v5";
  EXPECT_EQ(LookupPlanner::Create(o, GpuInventory{}, cache_.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LookupPlannerTest, PrepareValidatesAndChangesNothing) {
  auto p = Planner();
  EXPECT_FALSE(p->Prepare(Spec1b(), "", "")->has_value());
  EXPECT_EQ(p->Prepare(Spec1b(), "llama-3.2-1b", "{}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Prepare(Spec1b(), "llama-9", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Prepare(Spec1b(), "", "{\"hidden_size\": \"x\"}").status().code(),
            absl::StatusCode::kInvalidArgument);
  NamespaceSpec tp3 = Spec1b();
  tp3.layout.tp_size = 3;  // 8 KV heads cannot be split 3 ways
  EXPECT_EQ(p->Prepare(tp3, "llama-3.2-1b", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(p->Namespace(ns_).has_value());
  auto ok = p->Prepare(Spec1b(), "llama-3.2-1b", "");
  ASSERT_TRUE(ok.ok() && ok->has_value());
  EXPECT_EQ((*ok)->name, "llama-3.2-1b");
}

TEST_F(LookupPlannerTest, NoModelOrNoGpuMeansNoPlan) {
  PutChain(4);
  auto p = Planner();
  NamespacePlanning np = p->Attach(ns_, Spec1b(), std::nullopt);
  EXPECT_FALSE(np.plans_enabled);
  EXPECT_FALSE(p->Plan(ns_, Match(4), 0).has_value());
  auto off = Planner("auto");
  np = off->Attach(ns_, Spec1b(), *off->Prepare(Spec1b(), "llama-3.2-1b", ""));
  EXPECT_FALSE(np.plans_enabled);
  EXPECT_EQ(np.cost_model, "llama-3.2-1b");
  EXPECT_FALSE(off->Plan(ns_, Match(4), 0).has_value());
}

// The plan's cut moves when the host tier's measured bandwidth changes.
TEST_F(LookupPlannerTest, CutFollowsMeasuredBandwidth) {
  PutChain(8);
  auto p = Planner();
  ASSERT_TRUE(p->Attach(ns_, Spec1b(), *p->Prepare(Spec1b(), "llama-3.2-1b", "")).plans_enabled);
  cache_->host_meter().Seed(50e9, 5e-6, "test");
  std::optional<costmodel::CutPlan> plan = p->Plan(ns_, Match(8), 0);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->cut_blocks, 8u);
  EXPECT_EQ(plan->tokens, 128);
  EXPECT_LT(plan->total_seconds, plan->recompute_all_seconds);
  // 10 MB/s: a 256 KiB block takes 26 ms to fetch, far above recomputing it.
  cache_->host_meter().Seed(10e6, 5e-6, "test");
  plan = p->Plan(ns_, Match(8), 0);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->cut_blocks, 0u);
  EXPECT_DOUBLE_EQ(plan->total_seconds, plan->recompute_all_seconds);
  // A longer prompt raises recompute cost but the cut stays within the match.
  cache_->host_meter().Seed(50e9, 5e-6, "test");
  plan = p->Plan(ns_, Match(8), 4096);
  EXPECT_EQ(plan->cut_blocks, 8u);
  EXPECT_EQ(plan->tokens, 4096);
}

// A closed namespace's model is forgotten: no plan, no entry, until it is
// attached again.
TEST_F(LookupPlannerTest, DetachForgetsTheNamespace) {
  PutChain(4);
  auto p = Planner();
  ASSERT_TRUE(p->Attach(ns_, Spec1b(), *p->Prepare(Spec1b(), "llama-3.2-1b", "")).plans_enabled);
  ASSERT_TRUE(p->Plan(ns_, Match(4), 0).has_value());
  p->Detach(ns_);
  EXPECT_FALSE(p->Namespace(ns_).has_value());
  EXPECT_FALSE(p->Plan(ns_, Match(4), 0).has_value());
  p->Detach(ns_);  // twice is harmless
  ASSERT_TRUE(p->Attach(ns_, Spec1b(), *p->Prepare(Spec1b(), "llama-3.2-1b", "")).plans_enabled);
  EXPECT_TRUE(p->Plan(ns_, Match(4), 0).has_value());
}

// Matched blocks spread over tiers: the cut stops where the slow tier starts.
TEST_F(LookupPlannerTest, CutLandsAtTheTierBoundary) {
  auto p = Planner();
  ASSERT_TRUE(p->Attach(ns_, Spec1b(), *p->Prepare(Spec1b(), "llama-3.2-1b", "")).plans_enabled);
  std::vector<MatchedBlock> matched;
  for (int i = 0; i < 8; ++i) matched.push_back({Key(i), 256 * 1024, /*on_host=*/i < 4});
  cache_->host_meter().Seed(50e9, 5e-6, "test");
  // A 256 KiB block from a 10 MB/s NVMe: 26 ms, far above recomputing it.
  cache_->nvme_meter().Seed(10e6, 100e-6, "test");
  std::optional<costmodel::CutPlan> plan = p->Plan(ns_, matched, 0);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->cut_blocks, 4u);
  EXPECT_NEAR(plan->fetch_seconds, 5e-6 + 4 * 256 * 1024 / 50e9, 1e-12);
  cache_->nvme_meter().Seed(50e9, 10e-6, "test");
  plan = p->Plan(ns_, matched, 0);
  EXPECT_EQ(plan->cut_blocks, 8u);
  // One latency per run of blocks on the same tier.
  EXPECT_NEAR(plan->fetch_seconds, 5e-6 + 10e-6 + 8 * 256 * 1024 / 50e9, 1e-12);
}

TEST_F(LookupPlannerTest, RecurrentModelPlansRecompute) {
  // The hybrid's two attention layers, 2 KV heads of dim 128, on one rank.
  NamespaceSpec spec;
  spec.model_id = "hybrid";
  spec.layout = KvLayout{2, 2, 128, DType::kBf16, 16, 0, 1};
  const NamespaceId ns = cache_->OpenNamespace(spec)->id;
  auto p = Planner();
  std::ifstream in(std::string(KVTIER_TESTDATA) + "/recurrent_hybrid.json");
  std::stringstream json;
  json << in.rdbuf();
  auto model = p->Prepare(spec, "", json.str());
  ASSERT_TRUE(model.ok()) << model.status();
  const NamespacePlanning np = p->Attach(ns, spec, *model);
  EXPECT_NE(np.note.find("recurrent layers"), std::string::npos) << np.note;
  cache_->host_meter().Seed(50e9, 5e-6, "test");
  std::vector<MatchedBlock> matched;
  for (int i = 0; i < 8; ++i) matched.push_back({Key(i), 16 * 1024, true});
  std::optional<costmodel::CutPlan> plan = p->Plan(ns, matched, 0);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->cut_blocks, 0u);
}

TEST_F(LookupPlannerTest, ModelMustMatchTheLayout) {
  auto p = Planner();
  absl::StatusOr<std::optional<PreparedModel>> m = p->Prepare(Spec1b(), "llama-3.1-70b", "");
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("does not match the layout"), std::string::npos);
  // One rank of Llama-3.1-8B at TP 8 holds one KV head of dim 128.
  NamespaceSpec rank;
  rank.model_id = "meta-llama/Llama-3.1-8B";
  rank.layout = KvLayout{32, 1, 128, DType::kBf16, 16, 3, 8};
  EXPECT_TRUE(p->Prepare(rank, "llama-3.1-8b", "").ok());
  rank.layout.num_kv_heads = 8;  // the whole model's heads on one rank of 8
  EXPECT_FALSE(p->Prepare(rank, "llama-3.1-8b", "").ok());
  // DeepSeek-V3's latent: one 576-wide "head" on every rank.
  rank.layout = KvLayout{61, 1, 576, DType::kBf16, 4, 0, 8};
  EXPECT_TRUE(p->Prepare(rank, "deepseek-v3", "").ok());
  // The layout's own errors come first, as OpenNamespace words them.
  NamespaceSpec bad = Spec1b();
  bad.layout.dtype = DType::kUnspecified;
  m = p->Prepare(bad, "llama-3.2-1b", "");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message().find("model:"), std::string::npos) << m.status();
}

TEST_F(LookupPlannerTest, NvmeAdmissionFollowsTierValue) {
  char tmpl[] = "/tmp/kvtier-planner-XXXXXX";
  root_ = mkdtemp(tmpl);
  NvmeTierOptions nvme;
  nvme.store.dirs = {root_};
  nvme.store.bytes_per_dir = 16 * kMiB;
  nvme.store.slab_bytes = 2 * kMiB;
  nvme.start_mover = false;
  nvme.write_policy = "write_through";
  MakeCache(nvme);
  // A 1B model recomputes a token in ~4.5 us on an H100 at MFU 0.5; its 32 KiB
  // of KV take 33 us from a 1 GB/s NVMe: not worth it.
  cache_->nvme_meter().Seed(1e9, 100e-6, "test");
  auto p = Planner();
  NamespacePlanning np = p->Attach(ns_, Spec1b(), *p->Prepare(Spec1b(), "llama-3.2-1b", ""));
  EXPECT_FALSE(np.nvme_admitted);
  EXPECT_LT(np.nvme_value_seconds_per_token, 0);
  PutChain(4);
  EXPECT_EQ(cache_->RunMoverOnce(), 0u);
  EXPECT_GT(cache_->Snapshot().counters.admissions_refused_value, 0u);
  // At 100 GB/s it pays; the next plan re-evaluates and admits.
  cache_->nvme_meter().Seed(100e9, 10e-6, "test");
  ASSERT_TRUE(p->Plan(ns_, Match(4), 0).has_value());
  EXPECT_TRUE(p->Namespace(ns_)->nvme_admitted);
  EXPECT_EQ(cache_->RunMoverOnce(), 4u);
}

TEST_F(LookupPlannerTest, PricesAHitPerByteForTheEvictionPolicy) {
  auto p = Planner();
  NamespacePlanning small = p->Attach(ns_, Spec1b(), *p->Prepare(Spec1b(), "llama-3.2-1b", ""));
  NamespaceSpec spec8b;
  spec8b.model_id = "meta-llama/Llama-3.1-8B";
  spec8b.layout = KvLayout{32, 8, 128, DType::kBf16, 4, 0, 1};  // 512 KiB blocks
  const NamespaceId ns8b = cache_->OpenNamespace(spec8b)->id;
  NamespacePlanning big = p->Attach(ns8b, spec8b, *p->Prepare(spec8b, "llama-3.1-8b", ""));
  // Per KV byte, the 8B model recomputes about 6.5x the FLOPs of the 1B
  // model over 4x the bytes: a hit on its blocks is worth more.
  EXPECT_GT(small.retention_seconds_per_byte, 0);
  EXPECT_GT(big.retention_seconds_per_byte, 1.3 * small.retention_seconds_per_byte);
  EXPECT_LT(big.retention_seconds_per_byte, 2.5 * small.retention_seconds_per_byte);
  // Without a model nothing is priced.
  NamespaceSpec bare = Spec1b();
  bare.model_id = "unpriced";
  const NamespaceId ns_bare = cache_->OpenNamespace(bare)->id;
  EXPECT_EQ(p->Attach(ns_bare, bare, std::nullopt).retention_seconds_per_byte, 0);
}

TEST_F(LookupPlannerTest, PeerFetchIsJudgedAgainstRecomputeAtTheLinkBandwidth) {
  std::unique_ptr<LookupPlanner> p = Planner();
  const uint64_t bytes = 10 * 256 * 1024;  // 10 blocks of 16 tokens: 160 tokens
  // No model yet: nothing to weigh, pull.
  EXPECT_TRUE(p->PeerFetchBeatsRecompute(ns_, 0, 10, bytes, 1e6));
  ASSERT_TRUE(p->Attach(ns_, Spec1b(), *p->Prepare(Spec1b(), "llama-3.2-1b", "")).plans_enabled);
  // 160 tokens of a 1B model on an H100 recompute in about a millisecond:
  // 2.6 MB at 100 GB/s (26 us) beats it, at 100 MB/s (26 ms) does not.
  EXPECT_TRUE(p->PeerFetchBeatsRecompute(ns_, 0, 10, bytes, 100e9));
  EXPECT_FALSE(p->PeerFetchBeatsRecompute(ns_, 0, 10, bytes, 100e6));
  // A link not measured yet: pull (the first pull measures it).
  EXPECT_TRUE(p->PeerFetchBeatsRecompute(ns_, 0, 10, bytes, 0));
}

}  // namespace
}  // namespace kvtier
