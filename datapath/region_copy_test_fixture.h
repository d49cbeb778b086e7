// The fixture the Save and Load tests share: a real BlockCache with one
// namespace, chains of blocks in a region, and a runner for either copy.
#ifndef KVTIER_DATAPATH_REGION_COPY_TEST_FIXTURE_H_
#define KVTIER_DATAPATH_REGION_COPY_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "datapath/region_copy.h"
#include "storage/block_cache.h"
#include "testing/test_bytes.h"

namespace kvtier::region_copy_testing {

inline constexpr uint64_t kBlock = 64 * 1024;

inline void FillPattern(absl::Span<uint8_t> bytes, int seed) {
  const std::vector<uint8_t> b = DeterministicBytes(std::to_string(seed), bytes.size());
  std::copy(b.begin(), b.end(), bytes.begin());
}

inline BlockKey Key(int i) { return *BlockKey::Create("blk" + std::to_string(i)); }

class RegionCopyFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    BlockCacheOptions o;
    o.host_bytes = 32 << 20;
    o.slab_bytes = 4 << 20;
    o.max_block_bytes = 1 << 20;
    cache_ = *BlockCache::Create(o, &clock_);
    NamespaceSpec spec{"m", KvLayout{1, 1, 128, DType::kBf16, 256, 0, 1}, "", "", "",
                       {}};  // 128 KiB
    ns_ = cache_->OpenNamespace(spec)->id;
  }

  // n chained blocks at offsets 0, kBlock, 2 * kBlock...
  std::vector<RegionBlock> Chain(int n, int first = 0) {
    std::vector<RegionBlock> v;
    for (int i = first; i < first + n; ++i) {
      v.push_back({Key(i), i > 0 ? Key(i - 1) : BlockKey(), (i - first) * kBlock, kBlock, {}});
    }
    return v;
  }

  std::vector<BlockOutcome> Run(bool save, MemoryRegion& region,
                                const std::vector<RegionBlock>& blocks, absl::Status* status,
                                CopyEngine* engine = nullptr, BlockTransform* transform = nullptr) {
    std::vector<BlockOutcome> out;
    auto sink = [&](const BlockOutcome& o) {
      out.push_back(o);
      return true;
    };
    const KeepGoing go = [] { return true; };
    *status = save ? SaveFromRegion(*cache_, ns_, region, blocks, sink, go, engine, transform,
                                    std::nullopt, workers_)
                   : LoadIntoRegion(*cache_, ns_, region, blocks, sink, go, engine, transform,
                                    nullptr, workers_);
    return out;
  }

  FakeClock clock_;
  CopyWorkers* workers_ = nullptr;  // what Run passes: none, a thread per two-thread copy
  std::unique_ptr<BlockCache> cache_;
  NamespaceId ns_;
};

}  // namespace kvtier::region_copy_testing

#endif  // KVTIER_DATAPATH_REGION_COPY_TEST_FIXTURE_H_
