// BlockCache with its NVMe tier: demotion and promotion, admission, restart
// from the catalog, corrupt slots, I/O faults, and a randomized run checking
// the cross-tier invariants after every step.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/block_cache.h"
#include "testing/block_event_mirror.h"
#include "testing/faulty_io_engine.h"
#include "testing/host_tier_fixture.h"
#include "testing/test_bytes.h"

namespace kvtier {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

std::vector<uint8_t> Content(const std::string& key, size_t n) {
  return DeterministicBytes(key, n);
}

NamespaceSpec Spec() { return SpecWith64KiBBlocks("model-nvme"); }

class NvmeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvtier-tier-XXXXXX";
    root_ = mkdtemp(tmpl);
    posix_ = CreatePosixIoEngine();
    faulty_ = std::make_unique<FaultInjectingIoEngine>(posix_.get(), FaultPlan{});
    nvme_.store.dirs = {root_ + "/d0", root_ + "/d1"};
    nvme_.store.bytes_per_dir = 8 * kMiB;
    nvme_.store.slab_bytes = 1 * kMiB;
    nvme_.start_mover = false;
    nvme_.admit_min_uses = 1;
    nvme_.engine_for_testing = faulty_.get();
    Open();
  }
  void TearDown() override {
    cache_.reset();
    std::filesystem::remove_all(root_);
  }

  void Open(bool open_namespace = true) {
    cache_.reset();
    BlockCacheOptions o;
    o.host_bytes = 4 * kMiB;  // 64 blocks of 64 KiB
    o.slab_bytes = 1 * kMiB;
    o.max_block_bytes = 512 * kKiB;  // an NVMe slot (header + block) fits a 1 MiB slab
    o.max_namespaces = max_namespaces_;
    o.nvme = nvme_;
    o.probe_tiers = probe_;
    o.probe_bytes = 2 * kMiB;
    auto c = BlockCache::Create(o, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    cache_ = std::move(*c);
    if (open_namespace) ns_ = cache_->OpenNamespace(Spec())->id;
  }

  absl::Status Put(const std::vector<std::string>& chain, std::string parent = "") {
    ASSIGN_OR_RETURN(auto batch, cache_->BeginPut(ns_));
    for (const std::string& k : chain) {
      if (absl::Status s =
              batch->StartBlock(Key(k), parent.empty() ? BlockKey() : Key(parent), 64 * kKiB);
          !s.ok()) {
        return s;
      }
      RETURN_IF_ERROR(batch->Append(Content(k, 64 * kKiB)));
      parent = k;
    }
    return batch->Commit().status();
  }

  // Reads every key and checks its bytes.
  absl::Status ReadAll(const std::vector<std::string>& keys) {
    std::vector<BlockKey> ks;
    for (const auto& k : keys) ks.push_back(Key(k));
    ASSIGN_OR_RETURN(auto h, cache_->Read(ns_, ks));
    for (size_t i = 0; i < keys.size(); ++i) {
      auto want = Content(keys[i], 64 * kKiB);
      auto got = h[i].bytes();
      if (got.size() != want.size() || !std::equal(want.begin(), want.end(), got.begin())) {
        return absl::DataLossError(absl::StrCat("wrong bytes for ", keys[i]));
      }
    }
    return absl::OkStatus();
  }

  size_t Matched(const std::vector<std::string>& keys) {
    std::vector<BlockKey> ks;
    for (const auto& k : keys) ks.push_back(Key(k));
    auto r = cache_->Lookup(ns_, ks, false, absl::ZeroDuration());
    return r.ok() ? r->blocks.size() : 0;
  }

  std::vector<std::string> Chain(const std::string& prefix, int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(absl::StrCat(prefix, i));
    return out;
  }

  std::string root_;
  FakeClock clock_;
  std::unique_ptr<IoEngine> posix_;
  std::unique_ptr<FaultInjectingIoEngine> faulty_;
  NvmeTierOptions nvme_;
  std::unique_ptr<BlockCache> cache_;
  NamespaceId ns_;
  uint32_t max_namespaces_ = 1024;
  bool probe_ = false;
};

TEST_F(NvmeCacheTest, PressureDemotesAndReadsPromoteByteExact) {
  const auto chain = Chain("a", 60);  // 60 of 64 host slots: above the 90% watermark
  ASSERT_TRUE(Put(chain).ok());
  EXPECT_GT(cache_->RunMoverOnce(), 0u);
  CacheSnapshot snap = cache_->Snapshot(true);
  EXPECT_GT(snap.counters.demotions, 0u);
  EXPECT_LE(snap.host.used_bytes, 0.8 * snap.host.capacity_bytes);  // back under low watermark
  EXPECT_GT(snap.counters.host_copies_dropped, 0u);
  EXPECT_EQ(snap.blocks, 60u);  // nothing lost
  EXPECT_EQ(snap.stranded_blocks, 0u);
  EXPECT_EQ(Matched(chain), 60u);
  // Demotion wrote whole prefixes: every block on NVMe has its parent there.
  ASSERT_TRUE(ReadAll(chain).ok());
  snap = cache_->Snapshot(true);
  EXPECT_GT(snap.counters.promotions, 0u);
  EXPECT_EQ(snap.counters.promotions, snap.counters.nvme_hits);
  EXPECT_EQ(snap.counters.bytes_nvme_to_host, snap.counters.promotions * 64 * kKiB);
  EXPECT_GT(snap.nvme.tier.blocks, 0u);
  EXPECT_FALSE(snap.nvme.degraded);
}

TEST_F(NvmeCacheTest, EventsFollowDemotionsDropsPromotionsAndRemovals) {
  BlockEventMirror mirror;
  cache_->SetEventSink(&mirror);
  const auto chain = Chain("e", 60);
  ASSERT_TRUE(Put(chain).ok());
  ASSERT_GT(cache_->RunMoverOnce(), 0u);
  EXPECT_GT(mirror.stored(Medium::kNvme), 0u);   // demoted
  EXPECT_GT(mirror.removed(Medium::kHost), 0u);  // host copies dropped
  ASSERT_TRUE(ReadAll(chain).ok());              // promotions
  EXPECT_GT(mirror.stored(Medium::kHost), 60u);
  ASSERT_TRUE(cache_->Delete(ns_, {Key("e10")}, /*recursive=*/true).ok());
  EXPECT_GT(mirror.removed(Medium::kNvme), 0u);
  EXPECT_EQ(mirror.errors(), std::vector<std::string>());
  EXPECT_EQ(mirror.contents(), SnapshotContents(*cache_));
  cache_->SetEventSink(nullptr);
}

TEST_F(NvmeCacheTest, IoUringWithRegisteredArenaMovesBlocksByteExact) {
  nvme_.engine_for_testing = nullptr;
  nvme_.io = IoEngineOptions{"io_uring", 32};
  nvme_.register_arena = true;
  cache_.reset();
  BlockCacheOptions o;
  o.host_bytes = 4 * kMiB;
  o.slab_bytes = 1 * kMiB;
  o.max_block_bytes = 512 * kKiB;
  o.nvme = nvme_;
  auto c = BlockCache::Create(o, &clock_);
  if (!c.ok() && c.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << "io_uring not available here: " << c.status();
  }
  ASSERT_TRUE(c.ok()) << c.status();
  cache_ = std::move(*c);
  ns_ = cache_->OpenNamespace(Spec())->id;
  const std::string engine = cache_->Snapshot().nvme.io_engine;
  EXPECT_NE(engine.find("io_uring"), std::string::npos) << engine;
  EXPECT_NE(engine.find("host arena registered"), std::string::npos) << engine;
  const auto chain = Chain("u", 60);
  ASSERT_TRUE(Put(chain).ok());
  EXPECT_GT(cache_->RunMoverOnce(), 0u);
  ASSERT_TRUE(ReadAll(chain).ok());
  EXPECT_GT(cache_->Snapshot().counters.promotions, 0u);
}

TEST_F(NvmeCacheTest, AdmissionFilterKeepsOnceUsedBlocksOffNvme) {
  nvme_.admit_min_uses = 2;
  Open();
  const auto hot = Chain("hot", 20), cold = Chain("cold", 40);
  ASSERT_TRUE(Put(hot).ok());
  ASSERT_TRUE(Put(cold).ok());
  EXPECT_EQ(Matched(hot), 20u);  // a second use for every hot block
  cache_->RunMoverOnce();
  CacheSnapshot snap = cache_->Snapshot();
  EXPECT_GT(snap.counters.admissions_refused_filter, 0u);
  EXPECT_EQ(snap.counters.demotions, 20u);  // exactly the hot chain
}

TEST_F(NvmeCacheTest, NamespaceWithoutNvmeValueIsNotAdmitted) {
  nvme_.write_policy = "write_through";
  Open();
  ASSERT_TRUE(cache_->SetNvmeAdmission(ns_, false).ok());
  const auto chain = Chain("v", 10);
  ASSERT_TRUE(Put(chain).ok());
  EXPECT_EQ(cache_->RunMoverOnce(), 0u);
  CacheSnapshot snap = cache_->Snapshot();
  EXPECT_EQ(snap.counters.demotions, 0u);
  EXPECT_GT(snap.counters.admissions_refused_value, 0u);
  // Turned back on, the same blocks are written.
  ASSERT_TRUE(cache_->SetNvmeAdmission(ns_, true).ok());
  EXPECT_EQ(cache_->RunMoverOnce(), 10u);
  EXPECT_EQ(cache_->Snapshot().counters.demotions, 10u);
  const NamespaceId unknown = NamespaceId::FromParts(ns_.high() ^ 1, ns_.low());
  EXPECT_EQ(cache_->SetNvmeAdmission(unknown, false).code(), absl::StatusCode::kNotFound);
}

TEST_F(NvmeCacheTest, LookupReportsTierAndReadsFeedTheMeters) {
  nvme_.write_policy = "write_through";
  Open();
  const auto chain = Chain("m", 4);
  ASSERT_TRUE(Put(chain).ok());
  ASSERT_EQ(cache_->RunMoverOnce(), 4u);
  std::vector<BlockKey> keys;
  for (const std::string& k : chain) keys.push_back(Key(k));
  // Fill the host tier with another chain so the mover drops m's host copies.
  ASSERT_TRUE(Put(Chain("fill", 60)).ok());
  cache_->RunMoverOnce();
  absl::StatusOr<LookupResult> r = cache_->Lookup(ns_, keys, false, absl::ZeroDuration());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->blocks.size(), 4u);
  size_t on_nvme = 0;
  for (const MatchedBlock& b : r->blocks) on_nvme += b.on_host ? 0 : 1;
  EXPECT_GT(on_nvme, 0u);
  EXPECT_EQ(cache_->nvme_meter().Estimate().samples, 0u);
  ASSERT_TRUE(ReadAll(chain).ok());
  EXPECT_EQ(cache_->nvme_meter().Estimate().samples, 1u);  // one promotion read
  EXPECT_GT(cache_->nvme_meter().Estimate().bytes_per_s, 0);
  EXPECT_GT(cache_->host_meter().Estimate().samples, 0u);
  r = cache_->Lookup(ns_, keys, false, absl::ZeroDuration());
  for (const MatchedBlock& b : r->blocks) EXPECT_TRUE(b.on_host);  // promoted
}

TEST_F(NvmeCacheTest, ProbeSeedsBothMeters) {
  probe_ = true;
  Open();
  for (TransferMeter* m : {&cache_->host_meter(), &cache_->nvme_meter()}) {
    const TransferEstimate e = m->Estimate();
    EXPECT_EQ(e.source, "probe");
    EXPECT_GT(e.bytes_per_s, 0);
    EXPECT_GE(e.latency_s, 0);
  }
  EXPECT_FALSE(std::filesystem::exists(nvme_.store.dirs[0] + "/kvtier-probe.tmp"));
}

TEST_F(NvmeCacheTest, PersistedBlocksSurviveRestart) {
  nvme_.write_policy = "write_through";
  Open();
  const auto chain = Chain("p", 10);
  ASSERT_TRUE(Put(chain).ok());
  ASSERT_TRUE(Put(Chain("q", 3), "p4").ok());  // a branch
  EXPECT_EQ(cache_->RunMoverOnce(), 13u);
  Open(/*open_namespace=*/false);  // restart: nothing in host memory
  CacheSnapshot snap = cache_->Snapshot(true);
  EXPECT_EQ(snap.counters.recovered_blocks, 13u);
  EXPECT_EQ(snap.counters.recovery_dropped, 0u);
  EXPECT_EQ(snap.host.blocks, 0u);
  EXPECT_EQ(snap.stranded_blocks, 0u);
  // The namespace serves nothing until an engine opens it again.
  EXPECT_EQ(cache_->Lookup(NamespaceId::Of(Spec()), {Key("p0")}, false, absl::ZeroDuration())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  auto reopened = cache_->OpenNamespace(Spec());
  ASSERT_TRUE(reopened.ok());
  EXPECT_FALSE(reopened->created);
  ns_ = reopened->id;
  EXPECT_EQ(Matched(chain), 10u);
  ASSERT_TRUE(ReadAll(chain).ok());
  ASSERT_TRUE(ReadAll({"q0", "q1", "q2"}).ok());
  EXPECT_EQ(cache_->Snapshot().counters.promotions, 13u);
}

TEST_F(NvmeCacheTest, CorruptSlotBetweenRunsIsAMissNeverData) {
  nvme_.write_policy = "write_through";
  Open();
  ASSERT_TRUE(Put(Chain("c", 4)).ok());
  ASSERT_EQ(cache_->RunMoverOnce(), 4u);
  cache_.reset();
  // Flip bytes in the middle of every slot file (behind the daemon's back).
  for (const std::string& dir : nvme_.store.dirs) {
    const std::string f = dir + "/kvtier-slots.dat";
    FILE* fp = std::fopen(f.c_str(), "r+b");
    ASSERT_NE(fp, nullptr);
    std::vector<uint8_t> buf(8 * kMiB);
    ASSERT_EQ(std::fread(buf.data(), 1, buf.size(), fp), buf.size());
    for (size_t off = 0; off < buf.size(); off += 4096) {
      if (buf[off] == 'K') buf[off + 4096 + 100] ^= 0xff;  // a payload byte after each header
    }
    std::rewind(fp);
    ASSERT_EQ(std::fwrite(buf.data(), 1, buf.size(), fp), buf.size());
    std::fclose(fp);
  }
  Open();
  EXPECT_EQ(cache_->Snapshot().counters.recovered_blocks, 4u);  // recovery does not scan slots
  absl::Status s = ReadAll({"c0"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  CacheSnapshot snap = cache_->Snapshot(true);
  EXPECT_EQ(snap.counters.nvme_read_failures, 1u);
  EXPECT_EQ(snap.blocks, 0u);  // c0 and its descendants dropped
  EXPECT_EQ(snap.stranded_blocks, 0u);
  EXPECT_EQ(snap.nvme.tier.used_bytes, 0u);  // their slots freed
  Open();
  EXPECT_EQ(cache_->Snapshot().counters.recovered_blocks, 0u);  // catalog entries gone too
}

TEST_F(NvmeCacheTest, IoFaultsDegradeButNeverFailRequests) {
  nvme_.write_policy = "write_through";
  Open();
  faulty_->SetPlan(FaultPlan{1.0, 0, 0, 0, 7});  // every I/O fails with EIO
  ASSERT_TRUE(Put(Chain("f", 5)).ok());
  EXPECT_EQ(cache_->RunMoverOnce(), 0u);
  CacheSnapshot snap = cache_->Snapshot();
  EXPECT_TRUE(snap.nvme.degraded);
  EXPECT_FALSE(snap.nvme.last_error.empty());
  EXPECT_GT(snap.counters.nvme_write_failures, 0u);
  EXPECT_EQ(snap.nvme.tier.used_bytes, 0u);  // failed slots freed
  EXPECT_TRUE(ReadAll(Chain("f", 5)).ok());  // still served from host memory
  ASSERT_TRUE(Put(Chain("g", 2)).ok());
  faulty_->SetPlan(FaultPlan{});  // the device recovers
  EXPECT_EQ(cache_->RunMoverOnce(), 7u);
  EXPECT_FALSE(cache_->Snapshot().nvme.degraded);
}

TEST_F(NvmeCacheTest, WearBudgetStopsAdmissionButNotRequests) {
  nvme_.write_policy = "write_through";
  // Per device: 1 GB drive at 0.00576 DWPD with full use = 5.76 MB/day; a
  // bucket of one hour holds 240 KB: 3 slots of 68 KiB (header + 64 KiB).
  // Two devices: 6 blocks are admitted, then admission stops.
  nvme_.wear = WearOptions{1'000'000'000, 0.00576, 5, 1.0, 3600};
  Open();
  ASSERT_TRUE(Put(Chain("w", 10)).ok());
  EXPECT_EQ(cache_->RunMoverOnce(), 6u);
  CacheSnapshot snap = cache_->Snapshot();
  EXPECT_GT(snap.counters.admissions_refused_budget, 0u);
  std::vector<DeviceWear> wear = cache_->Wear();
  ASSERT_EQ(wear.size(), 2u);
  EXPECT_TRUE(wear[0].report.over_budget || wear[1].report.over_budget);
  EXPECT_EQ(wear[0].report.bytes_written + wear[1].report.bytes_written, 6 * (64 + 4) * kKiB);
  EXPECT_GT(wear[0].report.write_rate_bytes_per_s + wear[1].report.write_rate_bytes_per_s, 0);
  // Requests keep working: every block is still served, from host memory.
  ASSERT_TRUE(Put(Chain("x", 3)).ok());
  EXPECT_TRUE(ReadAll(Chain("w", 10)).ok());
  // A day later the budget has refilled and admission resumes.
  clock_.Advance(absl::Hours(24));
  EXPECT_GT(cache_->RunMoverOnce(), 0u);
  EXPECT_FALSE(cache_->Wear()[0].report.over_budget && cache_->Wear()[1].report.over_budget);
}

TEST_F(NvmeCacheTest, PartialWriteFailuresNeverPersistAChildWithoutItsParent) {
  nvme_.write_policy = "write_through";
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::filesystem::remove_all(root_);
    Open();
    ASSERT_TRUE(Put(Chain("p", 24)).ok());
    faulty_->SetPlan(FaultPlan{0.3, 0, 0, 0, seed});  // 30% of writes fail
    for (int pass = 0; pass < 4; ++pass) cache_->RunMoverOnce();
    faulty_->SetPlan(FaultPlan{});
    ASSERT_GT(cache_->Snapshot().counters.nvme_write_failures, 0u) << "seed " << seed;
    Open(/*open_namespace=*/false);  // restart: only what the catalog holds
    const CacheSnapshot snap = cache_->Snapshot(true);
    // Every committed entry has its parent committed: nothing to drop.
    EXPECT_EQ(snap.counters.recovery_dropped, 0u) << "seed " << seed;
    EXPECT_EQ(snap.stranded_blocks, 0u);
    ns_ = cache_->OpenNamespace(Spec())->id;
    const size_t recovered = snap.counters.recovered_blocks;
    // The recovered blocks are exactly a prefix of the chain, and read back.
    EXPECT_EQ(Matched(Chain("p", 24)), recovered) << "seed " << seed;
    auto prefix = Chain("p", static_cast<int>(recovered));
    if (!prefix.empty()) {
      EXPECT_TRUE(ReadAll(prefix).ok());
    }
  }
}

TEST_F(NvmeCacheTest, RecoveredNamespacesDoNotTakeNamespaceSlots) {
  nvme_.write_policy = "write_through";
  Open();
  ASSERT_TRUE(Put(Chain("n", 3)).ok());
  ASSERT_EQ(cache_->RunMoverOnce(), 3u);
  max_namespaces_ = 1;
  Open(/*open_namespace=*/false);
  EXPECT_EQ(cache_->Snapshot().namespaces, 0u);
  EXPECT_TRUE(cache_->Namespaces().empty());  // not listed until an engine opens it
  NamespaceSpec other = Spec();
  other.model_id = "another-model";
  ASSERT_TRUE(cache_->OpenNamespace(other).ok());  // the one slot is free
  // Re-opening the recovered namespace now counts against the limit.
  EXPECT_EQ(cache_->OpenNamespace(Spec()).status().code(), absl::StatusCode::kResourceExhausted);
  // Once its blocks are gone, a recovered namespace leaves no trace.
  max_namespaces_ = 2;
  Open(/*open_namespace=*/true);
  ASSERT_TRUE(cache_->Delete(ns_, {Key("n0")}, true).ok());
  Open(/*open_namespace=*/false);
  EXPECT_EQ(cache_->Snapshot().counters.recovered_blocks, 0u);
}

TEST_F(NvmeCacheTest, DeleteRemovesBlocksFromBothTiersAndTheCatalog) {
  nvme_.write_policy = "write_through";
  Open();
  ASSERT_TRUE(Put(Chain("d", 3)).ok());
  ASSERT_EQ(cache_->RunMoverOnce(), 3u);
  auto r = cache_->Delete(ns_, {Key("d0")}, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->blocks_deleted, 3u);
  CacheSnapshot snap = cache_->Snapshot();
  EXPECT_EQ(snap.host.used_bytes, 0u);
  EXPECT_EQ(snap.nvme.tier.used_bytes, 0u);
  Open();
  EXPECT_EQ(cache_->Snapshot().counters.recovered_blocks, 0u);
}

// Random puts, reads, lookups with leases, deletes, clock moves and mover
// passes over two small tiers. After every step: nothing stranded, every
// block has a copy, and every read returns the bytes that were put.
TEST_F(NvmeCacheTest, RandomizedCrossTierInvariants) {
  nvme_.store.bytes_per_dir = 2 * kMiB;  // 2 x 2 MiB of NVMe: it fills too
  Open();
  std::mt19937_64 rng(4242);
  std::vector<std::string> known;
  int next = 0;
  for (int step = 0; step < 600; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {
      std::string parent;
      if (!known.empty() && rng() % 3) {
        parent = known[rng() % known.size()];
        if (Matched({parent}) == 0) parent.clear();
      }
      const auto chain = Chain(absl::StrCat("r", next++, "-"), 1 + static_cast<int>(rng() % 4));
      absl::Status s = Put(chain, parent);
      ASSERT_TRUE(s.ok() || s.code() == absl::StatusCode::kResourceExhausted) << s;
      if (s.ok()) known.insert(known.end(), chain.begin(), chain.end());
    } else if (op < 6 && !known.empty()) {
      const std::string k = known[rng() % known.size()];
      if (Matched({k}) == 1) {
        absl::Status s = ReadAll({k});
        ASSERT_TRUE(s.ok() || s.code() == absl::StatusCode::kResourceExhausted) << s;
      }
    } else if (op < 7 && !known.empty()) {
      cache_->Lookup(ns_, {Key(known[rng() % known.size()])}, true, absl::Seconds(2)).IgnoreError();
    } else if (op < 8 && !known.empty()) {
      cache_->Delete(ns_, {Key(known[rng() % known.size()])}, true).IgnoreError();
    } else if (op < 9) {
      clock_.Advance(absl::Seconds(1));
    } else {
      cache_->RunMoverOnce();
    }
    ASSERT_EQ(cache_->Snapshot(true).stranded_blocks, 0u) << "step " << step;
  }
  const CacheSnapshot snap = cache_->Snapshot(true);
  EXPECT_GT(snap.counters.demotions, 20u);
  EXPECT_GT(snap.counters.promotions, 5u);
  EXPECT_GE(snap.host.blocks + snap.nvme.tier.blocks, snap.blocks);  // every block has a copy
}

}  // namespace
}  // namespace kvtier

namespace kvtier {
namespace {

// Random operations on two namespaces that use the same key names, over both
// tiers, checked against a reference model after every step:
//  - never strand (the index scan finds no block without its parent);
//  - never serve across namespaces (every byte read is the byte put in
//    that namespace; the two namespaces hold different bytes per key);
//  - leases honoured (every block of an unexpired lease is still matched);
//  - a successful Delete makes its key miss.
TEST_F(NvmeCacheTest, RandomizedAgainstAReferenceModel) {
  nvme_.store.bytes_per_dir = 2 * kMiB;
  Open();
  NamespaceSpec other_spec = Spec();
  other_spec.salt = "tenant-b";
  const NamespaceId ids[2] = {ns_, cache_->OpenNamespace(other_spec)->id};
  auto content = [&](int n, const std::string& k) {
    return Content(ids[n].ToHex() + "/" + k, 64 * kKiB);
  };
  struct Lease {
    int ns;
    std::vector<std::string> keys;
    std::string id;
    absl::Time expiry;
  };
  std::vector<Lease> leases;
  std::mt19937_64 rng(99);
  auto key_name = [&](uint64_t i) { return absl::StrCat("k", i); };
  uint64_t served = 0, leased_checks = 0;
  for (int step = 0; step < 800; ++step) {
    const int n = static_cast<int>(rng() % 2);
    const NamespaceId& ns = ids[n];
    const int op = static_cast<int>(rng() % 13);
    if (op < 4) {
      // Grow chain c by 1..4 blocks from its longest cached prefix.
      const uint64_t c = rng() % 8;
      std::vector<BlockKey> all;
      for (uint64_t i = 0; i < 16; ++i) all.push_back(Key(key_name(c * 16 + i)));
      const size_t have = cache_->Lookup(ns, all, false, absl::ZeroDuration())->blocks.size();
      if (have == all.size()) continue;
      auto batch = *cache_->BeginPut(ns);
      bool ok = true;
      const size_t len = std::min<size_t>(1 + rng() % 4, all.size() - have);
      for (size_t i = have; i < have + len && ok; ++i) {
        const std::string k = key_name(c * 16 + i);
        ok = batch->StartBlock(all[i], i == 0 ? BlockKey() : all[i - 1], 64 * kKiB).ok() &&
             batch->Append(content(n, k)).ok();
      }
      if (ok) {
        absl::Status s = batch->Commit().status();
        ASSERT_TRUE(s.ok() || s.code() == absl::StatusCode::kAlreadyExists ||
                    s.code() == absl::StatusCode::kAborted)
            << s;
      }
    } else if (op < 7) {
      const std::string k = key_name(rng() % 128);
      auto h = cache_->Read(ns, {Key(k)});
      if (h.ok()) {
        const auto want = content(n, k);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), (*h)[0].bytes().begin()))
            << "wrong bytes for " << k << " in namespace " << n;
        ++served;
      } else {
        ASSERT_TRUE(h.status().code() == absl::StatusCode::kNotFound ||
                    h.status().code() == absl::StatusCode::kResourceExhausted)
            << h.status();
      }
    } else if (op < 8) {
      std::vector<BlockKey> keys;
      std::vector<std::string> names;
      const uint64_t start = (rng() % 8) * 16;  // a chain's first blocks
      for (uint64_t i = start; i < start + 3; ++i) {
        keys.push_back(Key(key_name(i)));
        names.push_back(key_name(i));
      }
      auto r = cache_->Lookup(ns, keys, true, absl::Seconds(1 + rng() % 4));
      ASSERT_TRUE(r.ok()) << r.status();
      if (!r->lease_id.empty()) {
        names.resize(r->blocks.size());
        leases.push_back({n, names, r->lease_id, r->lease_expiry});
      }
    } else if (op < 9 && !leases.empty()) {
      const size_t i = rng() % leases.size();
      cache_->Release(leases[i].id).IgnoreError();
      leases.erase(leases.begin() + static_cast<long>(i));
    } else if (op < 10 && rng() % 4 == 0) {
      const std::string k = key_name(rng() % 128);
      if (cache_->Delete(ns, {Key(k)}, rng() % 2).ok()) {
        ASSERT_EQ(cache_->Lookup(ns, {Key(k)}, false, absl::ZeroDuration())->blocks.size(), 0u);
      }
    } else if (op < 11) {
      clock_.Advance(absl::Milliseconds(500));
    } else if (op >= 11) {
      cache_->RunMoverOnce();
    }
    // The model's checks.
    ASSERT_EQ(cache_->Snapshot(true).stranded_blocks, 0u) << "step " << step;
    const absl::Time now = clock_.Now();
    leases.erase(std::remove_if(leases.begin(), leases.end(),
                                [&](const Lease& l) { return l.expiry <= now; }),
                 leases.end());
    for (const Lease& l : leases) {
      for (const std::string& k : l.keys) {
        ASSERT_EQ(cache_->Lookup(ids[l.ns], {Key(k)}, false, absl::ZeroDuration())->blocks.size(),
                  1u)
            << "leased block " << k << " vanished at step " << step;
        ++leased_checks;
      }
    }
  }
  EXPECT_GT(served, 50u);
  EXPECT_GT(leased_checks, 50u);
  const CacheSnapshot snap = cache_->Snapshot();
  EXPECT_GT(snap.counters.demotions, 10u);
  EXPECT_GT(snap.counters.promotions, 5u);
}

}  // namespace
}  // namespace kvtier
