#include "storage/nvme/nvme_tier.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/host_arena.h"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

class NvmeTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kvtier-nvmetier-XXXXXX";
    root_ = mkdtemp(tmpl);
    engine_ = CreatePosixIoEngine();
    options_.store.dirs = {root_ + "/d0", root_ + "/d1"};
    options_.store.bytes_per_dir = 4 * kMiB;
    options_.store.slab_bytes = kMiB;
    options_.start_mover = false;
    options_.engine_for_testing = engine_.get();
    auto arena = HostArena::Create(kMiB);
    ASSERT_TRUE(arena.ok());
    arena_ = std::move(*arena);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  absl::StatusOr<std::unique_ptr<NvmeTier>> Open() {
    return NvmeTier::Open(options_, 512 * 1024, kMiB, {arena_->data(), arena_->size()}, &clock_);
  }

  std::string root_;
  std::unique_ptr<IoEngine> engine_;
  NvmeTierOptions options_;
  std::unique_ptr<HostArena> arena_;
  FakeClock clock_;
};

TEST_F(NvmeTierTest, ParsesTheWritePolicyOnce) {
  options_.write_policy = "write_through_after_hits";
  options_.write_through_hits = 5;
  options_.admit_min_uses = 3;
  auto tier = Open();
  ASSERT_TRUE(tier.ok()) << tier.status();
  EXPECT_EQ((*tier)->rule().policy, WritePolicy::kWriteThroughAfterHits);
  EXPECT_EQ((*tier)->rule().write_through_hits, 5u);
  EXPECT_EQ((*tier)->rule().admit_min_uses, 3u);
  EXPECT_EQ((*tier)->Snapshot().write_policy, "write_through_after_hits");
  EXPECT_EQ((*tier)->io_engine_note(), absl::StrCat(engine_->name(), " (injected)"));
}

TEST_F(NvmeTierTest, RejectsBadOptionsBeforeTouchingTheDisk) {
  options_.write_policy = "sometimes";
  auto tier = Open();
  EXPECT_EQ(tier.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tier.status().message(),
            "nvme write policy 'sometimes' is not one of write_back, write_through, "
            "write_through_after_hits");
  options_.write_policy = "write_back";
  options_.host_low_watermark = 0.95;  // above the high one
  EXPECT_EQ(Open().status().message(), "nvme watermarks must satisfy 0 <= low < high <= 1");
  options_.host_low_watermark = 0.8;
  options_.store.slab_bytes = 512 * 1024;  // no room for the slot header
  EXPECT_EQ(Open().status().message(),
            "nvme slab size must hold the largest block plus its 4 KiB slot header");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/d0"));
}

TEST_F(NvmeTierTest, CountsBlocksAndReportsHealth) {
  auto opened = Open();
  ASSERT_TRUE(opened.ok()) << opened.status();
  NvmeTier& tier = **opened;
  absl::StatusOr<RecoveryResult> recovered =
      tier.Recover(nullptr, 512 * 1024, [](const CatalogEntry&) { FAIL(); });
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->recovered, 0u);
  EXPECT_EQ(recovered->dropped, 0u);
  tier.AddBlock(100);
  tier.AddBlock(50);
  BlockRecord gone;
  gone.size = 100;
  tier.Forget(gone);
  NvmeSnapshot snap = tier.Snapshot();
  EXPECT_TRUE(snap.enabled);
  EXPECT_EQ(snap.tier.blocks, 1u);
  EXPECT_EQ(snap.tier.stored_bytes, 50u);
  EXPECT_EQ(snap.tier.capacity_bytes, 8 * kMiB);
  EXPECT_EQ(snap.devices.size(), 2u);
  EXPECT_FALSE(snap.degraded);
  tier.NoteReadFailure(absl::DataLossError("bad slot"));  // verification: not degraded
  EXPECT_FALSE(tier.Snapshot().degraded);
  EXPECT_EQ(tier.last_error(), "bad slot");
  tier.NoteWriteFailure("disk gone");
  EXPECT_TRUE(tier.Snapshot().degraded);
  EXPECT_EQ(tier.Snapshot().last_error, "disk gone");
  tier.NoteWritesOk();
  EXPECT_FALSE(tier.Snapshot().degraded);
  EXPECT_EQ(tier.Wear().size(), 2u);
  EXPECT_EQ(tier.Wear()[1].dir, root_ + "/d1");
}

}  // namespace
}  // namespace kvtier
