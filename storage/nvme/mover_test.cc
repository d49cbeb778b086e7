#include "storage/nvme/mover.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "testing/host_tier_fixture.h"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// The pieces a mover pass works on, wired as BlockCache wires them.
class MoverTest : public HostTierFixture {
 protected:
  MoverTest() : HostTierFixture(4 * kMiB) {}

  void SetUp() override {
    char tmpl[] = "/tmp/kvtier-mover-XXXXXX";
    root_ = mkdtemp(tmpl);
    engine_ = CreatePosixIoEngine();
  }
  void TearDown() override {
    mover_.reset();
    host_.reset();
    nvme_.reset();
    std::filesystem::remove_all(root_);
  }

  void Open(const std::string& policy) {
    NvmeTierOptions o;
    o.store.dirs = {root_ + "/d0"};
    o.store.bytes_per_dir = 4 * kMiB;
    o.store.slab_bytes = kMiB;
    o.write_policy = policy;
    o.admit_min_uses = 1;
    o.start_mover = false;
    o.engine_for_testing = engine_.get();
    ASSERT_TRUE(MakeHostTier(4 * kMiB, kMiB, SpecWith64KiBBlocks("mover")).ok());
    auto nvme = NvmeTier::Open(o, 512 * 1024, kMiB, host_->arena(), &clock_);
    ASSERT_TRUE(nvme.ok()) << nvme.status();
    nvme_ = std::move(*nvme);
    host_->set_nvme(nvme_.get());
    mover_ = std::make_unique<Mover>(nvme_.get(), host_.get(), &index_, &namespaces_, &counters_);
  }

  size_t RunPass() {
    Mover::Pass pass = mover_->Select();
    mover_->Write(pass);
    const size_t written = mover_->Finish(pass);
    mover_->Balance();
    return written;
  }

  std::string root_;
  std::unique_ptr<IoEngine> engine_;
  FakeClock clock_;
  std::unique_ptr<NvmeTier> nvme_;
  std::unique_ptr<Mover> mover_;
};

TEST_F(MoverTest, WriteThroughWritesParentsBeforeChildren) {
  Open("write_through");
  BlockRecord* a = Store("a");
  BlockRecord* b = Store("b", "a");
  Mover::Pass pass = mover_->Select();
  ASSERT_EQ(pass.blocks, (std::vector<BlockRecord*>{a, b}));
  EXPECT_EQ(a->refs, 1u);  // pinned for the pass
  EXPECT_EQ(pass.writes[0].header.key, Key("a"));
  EXPECT_EQ(pass.writes[1].header.parent, Key("a"));
  mover_->Write(pass);
  ASSERT_TRUE(pass.committed.ok()) << pass.committed;
  EXPECT_EQ(mover_->Finish(pass), 2u);
  EXPECT_EQ(a->refs, 0u);
  EXPECT_TRUE(a->on_nvme);
  EXPECT_TRUE(b->on_nvme);
  EXPECT_TRUE(a->in_host);  // a host copy stays
  EXPECT_EQ(counters_.demotions, 2u);
  EXPECT_EQ(counters_.bytes_host_to_nvme, 2 * kBlock);
  EXPECT_EQ(nvme_->Snapshot().tier.blocks, 2u);
  uint64_t persisted = 0;
  ASSERT_TRUE(nvme_->catalog()
                  .ForEach([&](const CatalogEntry&) {
                    ++persisted;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(persisted, 2u);
  EXPECT_EQ(RunPass(), 0u);  // nothing left to write
}

TEST_F(MoverTest, WriteBackWaitsForHostPressure) {
  Open("write_back");
  Store("a");
  EXPECT_EQ(RunPass(), 0u);
  EXPECT_EQ(counters_.admissions_refused_filter, 0u);
  EXPECT_FALSE(index_.Find(ns_, Key("a"))->on_nvme);
}

TEST_F(MoverTest, RefusedNamespaceIsCountedAndSkipped) {
  Open("write_through");
  Store("a");
  ASSERT_TRUE(namespaces_.SetNvmeAdmission(ns_, false).ok());
  EXPECT_EQ(RunPass(), 0u);
  EXPECT_EQ(counters_.admissions_refused_value, 1u);
  ASSERT_TRUE(namespaces_.SetNvmeAdmission(ns_, true).ok());
  EXPECT_EQ(RunPass(), 1u);
}

TEST_F(MoverTest, RemovingADemotedBlockForgetsItOnNvme) {
  Open("write_through");
  BlockRecord* a = Store("a");
  ASSERT_EQ(RunPass(), 1u);
  host_->Remove(a);
  EXPECT_EQ(nvme_->Snapshot().tier.blocks, 0u);
  EXPECT_EQ(nvme_->store().used_bytes(), 0u);
  uint64_t persisted = 0;
  ASSERT_TRUE(nvme_->catalog()
                  .ForEach([&](const CatalogEntry&) {
                    ++persisted;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(persisted, 0u);
}

}  // namespace
}  // namespace kvtier
