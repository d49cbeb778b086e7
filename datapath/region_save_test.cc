// Save on two threads: a group of 2 MiB or more is copied into its slots by
// the calling thread and a helper, each block hashed as it is copied.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "datapath/region_copy_test_fixture.h"
#include "testing/vector_region.h"

namespace kvtier {
namespace {

using RegionCopyTest = region_copy_testing::RegionCopyFixture;
using region_copy_testing::FillPattern;
using region_copy_testing::kBlock;
using region_copy_testing::Key;

TEST_F(RegionCopyTest, TwoThreadSavesStoreEveryByteAndItsChecksum) {
  const int n = 48;  // 3 MiB in one group: copied on two threads
  VectorRegion src(n * kBlock), dst(n * kBlock);
  for (int i = 0; i < n; ++i) FillPattern(src.bytes().subspan(i * kBlock, kBlock), i);
  absl::Status s;
  // Blocks 0..9 are cached already (a 640 KiB group: one thread); the
  // two-thread group skips their slots.
  std::vector<BlockOutcome> out = Run(true, src, Chain(10), &s);
  ASSERT_TRUE(s.ok()) << s;
  // Odd blocks come in two pieces, the halves swapped.
  std::vector<RegionBlock> blocks = Chain(n);
  for (int i = 1; i < n; i += 2) {
    blocks[i].offset = blocks[i].size = 0;
    blocks[i].segments = {{i * kBlock + kBlock / 2, kBlock / 2}, {i * kBlock, kBlock / 2}};
  }
  out = Run(true, src, blocks, &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  for (const BlockOutcome& o : out) ASSERT_TRUE(o.status.ok()) << o.index << ": " << o.status;
  EXPECT_EQ(cache_->Snapshot().blocks, static_cast<uint64_t>(n));
  // A load verifies each block against the checksum its save recorded.
  out = Run(false, dst, Chain(n), &s);
  ASSERT_TRUE(s.ok()) << s;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(out[i].status.ok()) << i << ": " << out[i].status;
    const uint8_t* want = src.bytes().data() + i * kBlock;
    const uint8_t* got = dst.bytes().data() + i * kBlock;
    if (i % 2 == 1 && i >= 10) {  // stored as its pieces, in their order
      EXPECT_TRUE(std::equal(got, got + kBlock / 2, want + kBlock / 2)) << "block " << i;
      EXPECT_TRUE(std::equal(got + kBlock / 2, got + kBlock, want)) << "block " << i;
    } else {
      EXPECT_TRUE(std::equal(got, got + kBlock, want)) << "block " << i;
    }
  }
  EXPECT_EQ(cache_->Snapshot().counters.checksum_mismatches, 0u);
}

TEST_F(RegionCopyTest, TwoThreadSaveGroupFailsWhole) {
  const int n = 40;
  VectorRegion src(n * kBlock);
  std::vector<RegionBlock> blocks = Chain(n);
  blocks[25].parent = Key(99);  // not cached, not in the request
  absl::Status s;
  std::vector<BlockOutcome> out = Run(true, src, blocks, &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  EXPECT_EQ(out[25].status.code(), absl::StatusCode::kFailedPrecondition) << out[25].status;
  for (int i = 0; i < n; ++i) {
    if (i != 25) {
      EXPECT_EQ(out[i].status.code(), absl::StatusCode::kAborted) << i;
    }
  }
  EXPECT_EQ(cache_->Snapshot().blocks, 0u);           // nothing of the group is stored
  EXPECT_EQ(cache_->Snapshot().host.used_bytes, 0u);  // nor holds a slot
}

}  // namespace
}  // namespace kvtier
