#include "gpu/device_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "datapath/region_copy.h"
#include "gpu/device_region.h"
#include "storage/block_cache.h"
#include "testing/test_copy_engine.h"
#include "testing/test_device_allocator.h"

namespace kvtier {
namespace {

BlockKey Key(int i) { return *BlockKey::Create(absl::StrCat("k", i)); }

class DevicePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = DevicePool::Create(0, 3 * 1024, 1024, std::make_unique<HostDeviceAllocator>());
    ASSERT_TRUE(p.ok()) << p.status();
    pool_ = std::move(*p);
  }
  // Reserves, "copies" (fills with the block number) and commits block i.
  void Promote(int i, uint64_t checksum = 0) {
    std::optional<GpuTier::Entry> e = pool_->Reserve(ns_, Key(i), checksum ? checksum : i, 512);
    ASSERT_TRUE(e.has_value()) << i;
    std::memset(e->data, i, 512);
    pool_->Commit(*e, true);
  }
  NamespaceId ns_ = NamespaceId::FromParts(1, 2);
  std::unique_ptr<DevicePool> pool_;
};

TEST_F(DevicePoolTest, ServesCommittedBlocksWithTheirChecksum) {
  EXPECT_FALSE(pool_->Find(ns_, Key(1), 1).has_value());
  std::optional<GpuTier::Entry> filling = pool_->Reserve(ns_, Key(1), 1, 512);
  ASSERT_TRUE(filling.has_value());
  EXPECT_FALSE(pool_->Find(ns_, Key(1), 1).has_value());          // not before Commit
  EXPECT_FALSE(pool_->Reserve(ns_, Key(1), 1, 512).has_value());  // already being filled
  std::memset(filling->data, 7, 512);
  pool_->Commit(*filling, true);
  filling.reset();
  std::optional<GpuTier::Entry> hit = pool_->Find(ns_, Key(1), 1);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->size, 512u);
  EXPECT_EQ(hit->data[511], 7);
  // Another namespace's block of the same key is another block.
  EXPECT_FALSE(pool_->Find(NamespaceId::FromParts(9, 9), Key(1), 1).has_value());
  const GpuTier::Stats s = pool_->stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.promotions, 1u);
  EXPECT_EQ(s.resident_blocks, 1u);
  EXPECT_EQ(s.resident_bytes, 512u);
  EXPECT_EQ(s.capacity_bytes, 3u * 1024);
}

TEST_F(DevicePoolTest, AChangedChecksumIsNeverServed) {
  Promote(1, 100);
  EXPECT_FALSE(pool_->Find(ns_, Key(1), 101).has_value());
  EXPECT_FALSE(pool_->Find(ns_, Key(1), 100).has_value());  // dropped for good
  EXPECT_EQ(pool_->stats().stale, 1u);
  EXPECT_EQ(pool_->stats().resident_blocks, 0u);
  Promote(1, 101);  // the new bytes can come in
  EXPECT_TRUE(pool_->Find(ns_, Key(1), 101).has_value());
}

TEST_F(DevicePoolTest, EvictsLeastRecentlyUsedButNeverAPinnedSlot) {
  Promote(1);
  Promote(2);
  Promote(3);
  std::optional<GpuTier::Entry> pinned = pool_->Find(ns_, Key(1), 1);  // 1 is now most recent
  ASSERT_TRUE(pinned.has_value());
  EXPECT_TRUE(pool_->Find(ns_, Key(3), 3).has_value());  // then 3
  Promote(4);                                            // evicts 2, the least recently used
  EXPECT_FALSE(pool_->Find(ns_, Key(2), 2).has_value());
  EXPECT_TRUE(pool_->Find(ns_, Key(3), 3).has_value());
  Promote(5);  // 1 is older than 3 and 4 now, but pinned: 3 or 4 goes
  EXPECT_TRUE(pool_->Find(ns_, Key(1), 1).has_value());
  EXPECT_EQ(pinned->data[0], 1);  // its bytes were not overwritten
  EXPECT_EQ(pool_->stats().evictions, 2u);
  // With every slot pinned nothing can come in.
  std::optional<GpuTier::Entry> a = pool_->Find(ns_, Key(4), 4), b = pool_->Find(ns_, Key(5), 5);
  std::optional<GpuTier::Entry> c = pool_->Find(ns_, Key(3), 3);
  if (!c.has_value()) c = pool_->Find(ns_, Key(1), 1);
  EXPECT_FALSE(pool_->Reserve(ns_, Key(6), 6, 512).has_value());
}

TEST_F(DevicePoolTest, FailedFillsFreeTheSlotAndBadSizesAreRefused) {
  std::optional<GpuTier::Entry> e = pool_->Reserve(ns_, Key(1), 1, 512);
  ASSERT_TRUE(e.has_value());
  pool_->Commit(*e, false);
  e.reset();
  EXPECT_FALSE(pool_->Find(ns_, Key(1), 1).has_value());
  EXPECT_EQ(pool_->stats().resident_blocks, 0u);
  EXPECT_FALSE(pool_->Reserve(ns_, Key(2), 2, 1025).has_value());  // larger than a slot
  EXPECT_FALSE(pool_->Reserve(ns_, Key(2), 2, 0).has_value());
  EXPECT_EQ(DevicePool::Create(0, 100, 0, std::make_unique<HostDeviceAllocator>()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      DevicePool::Create(0, 100, 200, std::make_unique<HostDeviceAllocator>()).status().code(),
      absl::StatusCode::kInvalidArgument);
  // Without CUDA (or a GPU) the real allocator says so.
  auto real = DevicePool::Create(0, 1 << 20, 1 << 16, CudaDeviceAllocator());
  if (!real.ok()) {
    EXPECT_EQ(real.status().code(), absl::StatusCode::kFailedPrecondition) << real.status();
  }
}

// The tier in the data path: a Load into GPU memory copies from the host
// and promotes; the next Load of the same blocks is device to device; a
// block stored again with other bytes is never served from the old copy.
// A BlockCache with one namespace of 32 KiB blocks, a "device" engine and
// helpers, for the GPU tier in the data path.
class GpuTierLoadTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kBlock = 32 << 10;
  void SetUp() override {
    BlockCacheOptions o;
    o.host_bytes = 8 << 20;
    o.slab_bytes = 1 << 20;
    o.max_block_bytes = 64 << 10;
    cache_ = *BlockCache::Create(o, &clock_);
    ns_ = cache_->OpenNamespace({"m", KvLayout{1, 1, 128, DType::kBf16, 128, 0, 1}, "", "", "", {}})
              ->id;
  }
  std::unique_ptr<DevicePool> Pool(int slots) {
    auto pool =
        DevicePool::Create(0, slots * kBlock, kBlock, std::make_unique<HostDeviceAllocator>());
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }
  SystemClock clock_;
  std::unique_ptr<BlockCache> cache_;
  NamespaceId ns_;
  FakeDeviceEngine engine_;
};

TEST_F(GpuTierLoadTest, LoadsPromoteThenHitAndNeverServeStaleBytes) {
  BlockCache* cache = cache_.get();
  const NamespaceId ns = ns_;
  FakeDeviceEngine& engine = engine_;
  std::unique_ptr<DevicePool> pool = Pool(4);
  ASSERT_NE(pool, nullptr);
  std::vector<uint8_t> src_mem(3 * kBlock), dst_mem(3 * kBlock);
  for (size_t i = 0; i < src_mem.size(); ++i) src_mem[i] = static_cast<uint8_t>(i * 7 + 1);
  DeviceRegion src(0, {{src_mem.data(), src_mem.size()}}, "src", nullptr);
  DeviceRegion dst(0, {{dst_mem.data(), dst_mem.size()}}, "dst", nullptr);
  std::vector<RegionBlock> blocks;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back({Key(i), i ? Key(i - 1) : BlockKey(), i * kBlock, kBlock, {}});
  }
  std::vector<BlockOutcome> out;
  auto sink = [&](const BlockOutcome& b) {
    out.push_back(b);
    return true;
  };
  const KeepGoing go = [] { return true; };
  ASSERT_TRUE(SaveFromRegion(*cache, ns, src, blocks, sink, go, &engine).ok());
  auto load = [&]() {
    out.clear();
    std::fill(dst_mem.begin(), dst_mem.end(), 0);
    ASSERT_TRUE(
        LoadIntoRegion(*cache, ns, dst, blocks, sink, go, &engine, nullptr, pool.get()).ok());
    ASSERT_EQ(out.size(), 3u);
    for (const BlockOutcome& b : out) EXPECT_TRUE(b.status.ok()) << b.status;
  };
  load();
  EXPECT_EQ(dst_mem, src_mem);
  EXPECT_EQ(pool->stats().promotions, 3u);
  EXPECT_EQ(pool->stats().hits, 0u);
  const int batches = engine.batches.load();
  load();
  EXPECT_EQ(dst_mem, src_mem);
  EXPECT_EQ(pool->stats().hits, 3u);
  EXPECT_EQ(engine.batches.load(), batches + 1);  // one device-to-device batch

  // Block 2 deleted and stored again with other bytes: the tier's copy is
  // stale and the Load takes the new bytes from the host.
  ASSERT_TRUE(cache->Delete(ns, {Key(2)}, false).ok());
  std::vector<uint8_t> other(src_mem.begin() + 2 * kBlock, src_mem.end());
  for (uint8_t& b : other) b ^= 0xff;
  std::copy(other.begin(), other.end(), src_mem.begin() + 2 * kBlock);
  ASSERT_TRUE(SaveFromRegion(*cache, ns, src, {blocks[2]}, sink, go, &engine).ok());
  load();
  EXPECT_EQ(dst_mem, src_mem);
  EXPECT_EQ(pool->stats().stale, 1u);

  // A failed host-to-device batch promotes nothing.
  std::unique_ptr<DevicePool> empty = Pool(4);
  engine.fail = true;
  out.clear();
  ASSERT_TRUE(
      LoadIntoRegion(*cache, ns, dst, blocks, sink, go, &engine, nullptr, empty.get()).ok());
  ASSERT_EQ(out.size(), 3u);
  for (const BlockOutcome& b : out) EXPECT_FALSE(b.status.ok());
  EXPECT_EQ(empty->stats().resident_blocks, 0u);
  EXPECT_EQ(empty->stats().promotions, 0u);
}

// A Load abandoned mid-group (its caller went away) leaves no slot stuck
// half-filled: the same blocks promote on the next Load.
TEST_F(GpuTierLoadTest, CancelledLoadsLeakNoSlots) {
  BlockCache* cache = cache_.get();
  const NamespaceId ns = ns_;
  FakeDeviceEngine& engine = engine_;
  std::unique_ptr<DevicePool> pool = Pool(2);
  ASSERT_NE(pool, nullptr);
  std::vector<uint8_t> mem(2 * kBlock, 5), dst_mem(2 * kBlock);
  DeviceRegion src(0, {{mem.data(), mem.size()}}, "src", nullptr);
  DeviceRegion dst(0, {{dst_mem.data(), dst_mem.size()}}, "dst", nullptr);
  const std::vector<RegionBlock> blocks = {{Key(0), BlockKey(), 0, kBlock, {}},
                                           {Key(1), Key(0), kBlock, kBlock, {}}};
  std::vector<BlockOutcome> out;
  auto sink = [&](const BlockOutcome& b) {
    out.push_back(b);
    return true;
  };
  ASSERT_TRUE(SaveFromRegion(
                  *cache, ns, src, blocks, sink, [] { return true; }, &engine)
                  .ok());
  int asked = 0;
  const KeepGoing stop_at_second = [&] { return ++asked < 2; };
  out.clear();
  EXPECT_EQ(
      LoadIntoRegion(*cache, ns, dst, blocks, sink, stop_at_second, &engine, nullptr, pool.get())
          .code(),
      absl::StatusCode::kCancelled);
  EXPECT_TRUE(out.empty());  // nothing reported loaded
  // Both slots are free again: both blocks promote now.
  out.clear();
  ASSERT_TRUE(LoadIntoRegion(
                  *cache, ns, dst, blocks, sink, [] { return true; }, &engine, nullptr, pool.get())
                  .ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(pool->stats().promotions, 2u);
  EXPECT_EQ(pool->stats().resident_blocks, 2u);
}

}  // namespace
}  // namespace kvtier
