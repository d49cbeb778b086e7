#include "storage/nvme/mover.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "base/checksum.h"
#include "gtest/gtest.h"

namespace kvtier {
namespace {

constexpr uint64_t kBlock = 64 * 1024;
constexpr uint64_t kMiB = 1024 * 1024;
BlockKey Key(const std::string& k) { return *BlockKey::Create(k); }

NamespaceSpec Spec() {
  NamespaceSpec s;
  s.model_id = "mover";
  s.layout = KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1};  // 64 KiB blocks
  return s;
}

// The pieces a mover pass works on, wired as BlockCache wires them.
class MoverTest : public ::testing::Test {
 protected:
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
    auto allocator = SlabAllocator::Create(4 * kMiB, kMiB);
    ASSERT_TRUE(allocator.ok());
    auto arena = HostArena::Create((*allocator)->capacity());
    ASSERT_TRUE(arena.ok());
    auto nvme = NvmeTier::Open(o, 512 * 1024, kMiB, {(*arena)->data(), (*arena)->size()}, &clock_);
    ASSERT_TRUE(nvme.ok()) << nvme.status();
    nvme_ = std::move(*nvme);
    host_ = std::make_unique<HostTier>(std::move(*arena), std::move(*allocator), &index_,
                                       &namespaces_, &counters_);
    host_->set_nvme(nvme_.get());
    mover_ = std::make_unique<Mover>(nvme_.get(), host_.get(), &index_, &namespaces_, &counters_);
    ns_ = NamespaceId::Of(Spec());
    ASSERT_TRUE(namespaces_.Open(ns_, Spec(), kBlock).ok());
  }

  BlockRecord* Store(const std::string& key, const std::string& parent = "") {
    absl::StatusOr<SlabAllocator::Slot> slot = host_->Allocate(kBlock);
    EXPECT_TRUE(slot.ok());
    std::memset(host_->SlotData(*slot), key[0], kBlock);
    auto rec = std::make_unique<BlockRecord>();
    rec->ns = ns_;
    rec->key = Key(key);
    if (!parent.empty()) rec->parent_key = Key(parent);
    rec->size = kBlock;
    rec->slot = *slot;
    rec->checksum = Checksum64({host_->SlotData(*slot), kBlock});
    rec->uses = 1;
    EXPECT_TRUE(index_.Insert(std::move(rec)).ok());
    namespaces_.AddBlocks(*namespaces_.FindOpen(ns_), 1, kBlock);
    host_->AddBlocks(1, kBlock);
    return index_.Find(ns_, Key(key));
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
  PrefixIndex index_;
  TenantQuotas quotas_{
      TenantLimits{.max_namespaces = 4, .max_leases = 4, .max_reserved_bytes = 4 * kMiB}};
  NamespaceTable namespaces_{4, &quotas_};
  CacheCounters counters_;
  std::unique_ptr<NvmeTier> nvme_;
  std::unique_ptr<HostTier> host_;
  std::unique_ptr<Mover> mover_;
  NamespaceId ns_;
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
