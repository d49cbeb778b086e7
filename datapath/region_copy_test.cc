// Save and Load through memory regions, against a real BlockCache: per-block
// outcomes, partial failures, ranges, and the shared-memory file checks.
#include "datapath/region_copy.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status_macros.h"
#include "datapath/region_copy_test_fixture.h"
#include "datapath/shared_memory_region.h"
#include "testing/faulty_copy_engine.h"
#include "testing/test_bytes.h"
#include "testing/test_copy_engine.h"
#include "testing/vector_region.h"

namespace kvtier {
namespace {

using RegionCopyTest = region_copy_testing::RegionCopyFixture;
using region_copy_testing::FillPattern;
using region_copy_testing::kBlock;
using region_copy_testing::Key;

TEST_F(RegionCopyTest, SaveThenLoadRoundTripsEveryByte) {
  const int n = 150;  // three commit groups
  VectorRegion src(n * kBlock), dst(n * kBlock);
  for (int i = 0; i < n; ++i) {
    const std::vector<uint8_t> b = DeterministicBytes("blk" + std::to_string(i), kBlock);
    std::copy(b.begin(), b.end(), src.bytes().begin() + i * kBlock);
  }
  absl::Status s;
  std::vector<BlockOutcome> saved = Run(true, src, Chain(n), &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(saved.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(saved[i].index, static_cast<uint32_t>(i));
    EXPECT_TRUE(saved[i].status.ok()) << saved[i].status;
  }
  // Load in reverse order of offsets: destinations need not follow keys.
  std::vector<RegionBlock> load = Chain(n);
  for (int i = 0; i < n; ++i) load[i].offset = (n - 1 - i) * kBlock;
  std::vector<BlockOutcome> loaded = Run(false, dst, load, &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(loaded.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(loaded[i].status.ok()) << loaded[i].status;
    EXPECT_EQ(loaded[i].bytes, kBlock);
    EXPECT_TRUE(std::equal(dst.bytes().begin() + (n - 1 - i) * kBlock,
                           dst.bytes().begin() + (n - i) * kBlock,
                           src.bytes().begin() + i * kBlock))
        << "block " << i;
  }
}

// An engine with a tensor per layer: block i's two halves live in two
// "layer" areas of the region. Save gathers them; Load scatters them back
// into another layout, byte for byte.
TEST_F(RegionCopyTest, SegmentsGatherAndScatterPerLayerLayouts) {
  constexpr uint64_t kHalf = kBlock / 2;
  constexpr int n = 4;
  VectorRegion region(4 * n * kBlock);
  for (size_t i = 0; i < region.bytes().size(); ++i)
    region.bytes()[i] = static_cast<uint8_t>(i * 31);
  // Layer 0 at [0, n * kHalf), layer 1 at [n * kHalf, 2 * n * kHalf).
  std::vector<RegionBlock> save = Chain(n);
  for (int i = 0; i < n; ++i) {
    save[i].offset = save[i].size = 0;
    save[i].segments = {{i * kHalf, kHalf}, {n * kHalf + i * kHalf, kHalf}};
  }
  absl::Status s;
  std::vector<BlockOutcome> out = Run(true, region, save, &s);
  ASSERT_TRUE(s.ok()) << s;
  for (const BlockOutcome& o : out) ASSERT_TRUE(o.status.ok()) << o.status;
  // Load into a second area, layers interleaved the other way round.
  const uint64_t base = 2 * n * kBlock;
  std::vector<RegionBlock> load = Chain(n);
  for (int i = 0; i < n; ++i) {
    load[i].offset = load[i].size = 0;
    load[i].segments = {{base + (2 * i + 1) * kHalf, kHalf}, {base + 2 * i * kHalf, kHalf}};
  }
  out = Run(false, region, load, &s);
  ASSERT_TRUE(s.ok()) << s;
  const uint8_t* m = region.bytes().data();
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(out[i].status.ok()) << out[i].status;
    EXPECT_EQ(std::memcmp(m + base + (2 * i + 1) * kHalf, m + i * kHalf, kHalf), 0) << i;
    EXPECT_EQ(std::memcmp(m + base + 2 * i * kHalf, m + n * kHalf + i * kHalf, kHalf), 0) << i;
  }
  // Pieces overlapping each other, or too little room: refused.
  load[0].segments[1].offset = load[0].segments[0].offset + 10;
  EXPECT_TRUE(Run(false, region, load, &s).empty());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  load = Chain(1);
  load[0].offset = load[0].size = 0;
  load[0].segments = {{base, kHalf}, {base + kBlock, kHalf / 2}};
  out = Run(false, region, load, &s);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].status.code(), absl::StatusCode::kOutOfRange);
  load[0].segments.assign(kMaxSegmentsPerBlock + 1, {base, 1});
  EXPECT_TRUE(Run(true, region, load, &s).empty());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegionCopyTest, LoadReportsExactlyTheMissingBlocks) {
  VectorRegion src(4 * kBlock), dst(4 * kBlock);
  absl::Status s;
  Run(true, src, Chain(2), &s);  // blocks 0 and 1 cached
  ASSERT_TRUE(s.ok());
  std::vector<RegionBlock> load = Chain(4);  // 2 and 3 are not
  std::vector<BlockOutcome> out = Run(false, dst, load, &s);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_TRUE(out[1].status.ok());
  EXPECT_EQ(out[2].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(out[3].status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(out[3].bytes, 0u);
  // Too little room: OUT_OF_RANGE for that block only.
  load = Chain(2);
  load[1].size = kBlock / 2;
  out = Run(false, dst, load, &s);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_EQ(out[1].status.code(), absl::StatusCode::kOutOfRange);
}

// Load verifies its own copy (Read without verification): a corrupt host
// copy is never reported loaded, and it is dropped as Read would drop it.
TEST_F(RegionCopyTest, LoadNeverDeliversACorruptBlock) {
  VectorRegion src(3 * kBlock), dst(3 * kBlock);
  absl::Status s;
  Run(true, src, Chain(3), &s);
  ASSERT_TRUE(s.ok());
  absl::StatusOr<absl::Span<uint8_t>> bytes = cache_->MutableBytesForTesting(ns_, Key(1));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[100] ^= 0x01;
  std::vector<BlockOutcome> out = Run(false, dst, Chain(3), &s);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_EQ(out[1].status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(out[1].status.message().find("checksum"), std::string::npos) << out[1].status;
  EXPECT_EQ(out[1].bytes, 0u);
  EXPECT_EQ(cache_->Snapshot().counters.checksum_mismatches, 1u);
  // Dropped with its descendant: block 2 is gone as well.
  absl::StatusOr<LookupResult> r =
      cache_->Lookup(ns_, {Key(0), Key(1), Key(2)}, false, absl::ZeroDuration());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->blocks.size(), 1u);
}

// A group of 2 MiB or more saves and loads on two threads (blocks
// alternate), the second a thread started per group (no CopyWorkers) or a
// CopyWorkers worker: the outcomes still come in request order, every byte
// round-trips, and a corrupt block on either thread is caught and
// reported; the others arrive whole.
class TwoThreadCopyTest : public RegionCopyTest {
 protected:
  void CheckTwoThreadCopies();
};

void TwoThreadCopyTest::CheckTwoThreadCopies() {
  const int n = 48;  // 3 MiB in one group
  VectorRegion src(n * kBlock), dst(n * kBlock);
  for (int i = 0; i < n; ++i) {
    const std::vector<uint8_t> b = DeterministicBytes("blk" + std::to_string(i), kBlock);
    std::copy(b.begin(), b.end(), src.bytes().begin() + i * kBlock);
  }
  absl::Status s;
  Run(true, src, Chain(n), &s);
  ASSERT_TRUE(s.ok()) << s;
  // Break block 41 (the helper's) and block 44 (this thread's).
  for (int k : {41, 44}) {
    absl::StatusOr<absl::Span<uint8_t>> bytes = cache_->MutableBytesForTesting(ns_, Key(k));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    (*bytes)[7] ^= 0x80;
  }
  std::vector<BlockOutcome> out = Run(false, dst, Chain(n), &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(out[i].index, static_cast<uint32_t>(i));
    if (i == 41 || i == 44) {
      EXPECT_EQ(out[i].status.code(), absl::StatusCode::kNotFound) << i << ": " << out[i].status;
      EXPECT_EQ(out[i].bytes, 0u);
      continue;
    }
    ASSERT_TRUE(out[i].status.ok()) << i << ": " << out[i].status;
    EXPECT_TRUE(std::equal(dst.bytes().begin() + i * kBlock, dst.bytes().begin() + (i + 1) * kBlock,
                           src.bytes().begin() + i * kBlock))
        << "block " << i;
  }
  // Block 44 descends from 41: when 41's report comes first, it drops 44
  // with it and 44's own report finds nothing left to count.
  const uint64_t mismatches = cache_->Snapshot().counters.checksum_mismatches;
  EXPECT_GE(mismatches, 1u);
  EXPECT_LE(mismatches, 2u);
}

TEST_F(TwoThreadCopyTest, ThreadPerGroupKeepsTheOrderAndCatchesCorruptBlocks) {
  CheckTwoThreadCopies();
}

TEST_F(TwoThreadCopyTest, CopyWorkersKeepTheOrderAndCatchCorruptBlocks) {
  absl::StatusOr<std::unique_ptr<CopyWorkers>> workers = CopyWorkers::Create(2);
  ASSERT_TRUE(workers.ok()) << workers.status();
  workers_ = workers->get();
  CheckTwoThreadCopies();
  workers_ = nullptr;
}

TEST_F(RegionCopyTest, SaveRejectsBlocksLargerThanTheNamespaces) {
  VectorRegion src(4 * kBlock);
  std::vector<RegionBlock> blocks = Chain(2);
  blocks[1].size = 3 * kBlock;  // the namespace's blocks are 128 KiB
  absl::Status s;
  EXPECT_TRUE(Run(true, src, blocks, &s).empty());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->Snapshot().blocks, 0u);
}

TEST_F(RegionCopyTest, FailedSaveGroupAbortsTheRest) {
  VectorRegion src(4 * kBlock);
  std::vector<RegionBlock> blocks = Chain(4);
  blocks[0].parent = Key(99);  // a parent that is not cached
  absl::Status s;
  std::vector<BlockOutcome> out = Run(true, src, blocks, &s);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].status.code(), absl::StatusCode::kFailedPrecondition);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(out[i].status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(cache_->Snapshot().blocks, 0u);  // nothing stored
}

TEST_F(RegionCopyTest, BadRequestsTouchNothing) {
  VectorRegion region(2 * kBlock);
  absl::Status s;
  std::vector<RegionBlock> blocks = Chain(2);
  blocks[1].offset = 2 * kBlock - 10;  // runs past the end
  EXPECT_TRUE(Run(true, region, blocks, &s).empty());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  blocks = Chain(2);
  blocks[1].offset = ~uint64_t{0} - 5;  // offset + size overflows
  EXPECT_TRUE(Run(true, region, blocks, &s).empty());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  blocks = Chain(2);
  blocks[1].offset = kBlock / 2;  // overlapping destinations
  EXPECT_TRUE(Run(false, region, blocks, &s).empty());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  std::vector<BlockOutcome> out = Run(true, region, blocks, &s);  // overlapping sources are fine
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[1].status.ok()) << out[1].status;
  NamespaceId unknown = NamespaceId::FromParts(ns_.high() ^ 1, ns_.low());
  out.clear();
  s = LoadIntoRegion(*cache_, unknown, region, Chain(1), [&](const BlockOutcome& o) {
    out.push_back(o);
    return true;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(out.empty());
}

TEST_F(RegionCopyTest, CallerGoneStopsTheCopy) {
  VectorRegion src(4 * kBlock);
  int seen = 0;
  absl::Status s =
      SaveFromRegion(*cache_, ns_, src, Chain(4), [&](const BlockOutcome&) { return ++seen < 2; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(seen, 2);
}

// GPU regions go through the copy engine: one gather batch per Save group,
// one scatter batch per Load group, and the bytes arrive intact.
TEST_F(RegionCopyTest, DeviceRegionsMoveThroughTheCopyEngineOneBatchPerGroup) {
  VectorRegion src(4 * kBlock, MemoryKind::kDevice), dst(4 * kBlock, MemoryKind::kDevice);
  FillPattern(src.bytes(), 21);
  FakeDeviceEngine engine;
  // Block 1 is two segments, in reverse order in the region.
  std::vector<RegionBlock> blocks = Chain(3);
  blocks[1].offset = blocks[1].size = 0;
  blocks[1].segments = {{3 * kBlock + kBlock / 2, kBlock / 2}, {3 * kBlock, kBlock / 2}};
  absl::Status s;
  std::vector<BlockOutcome> out = Run(true, src, blocks, &s, &engine);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 3u);
  for (const BlockOutcome& o : out) EXPECT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(engine.batches, 1);
  out = Run(false, dst, blocks, &s, &engine);
  ASSERT_TRUE(s.ok()) << s;
  for (const BlockOutcome& o : out) {
    EXPECT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.bytes, kBlock);
  }
  EXPECT_EQ(engine.batches, 2);
  // Blocks occupy [0, 1) and [2, 4) blocks' worth of the region.
  auto same_blocks = [&](VectorRegion& r) {
    return std::memcmp(r.bytes().data(), src.bytes().data(), kBlock) == 0 &&
           std::memcmp(r.bytes().data() + 2 * kBlock, src.bytes().data() + 2 * kBlock,
                       2 * kBlock) == 0;
  };
  EXPECT_TRUE(same_blocks(dst));
  // The same blocks load byte-exact into host memory too.
  VectorRegion host(4 * kBlock);
  out = Run(false, host, blocks, &s);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(same_blocks(host));
}

TEST_F(RegionCopyTest, DeviceRegionsNeedADeviceEngineAndWholeTensorRanges) {
  VectorRegion src(4 * kBlock, MemoryKind::kDevice);
  absl::Status s;
  std::vector<BlockOutcome> out = Run(true, src, Chain(2), &s, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(out.empty());
  FakeDeviceEngine engine;
  std::vector<RegionBlock> outside = Chain(1);
  outside[0].offset = 4 * kBlock;
  out = Run(true, src, outside, &s, &engine);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.batches, 0);
  absl::StatusOr<LookupResult> r = cache_->Lookup(ns_, {Key(0)}, false, absl::ZeroDuration());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->blocks.empty());  // nothing was stored
}

// A failed device copy fails every block of its batch: a Save stores nothing
// of the group, a Load reports no block loaded.
TEST_F(RegionCopyTest, FailedDeviceCopiesNeverReportOk) {
  VectorRegion src(3 * kBlock, MemoryKind::kDevice), dst(3 * kBlock, MemoryKind::kDevice);
  FillPattern(src.bytes(), 5);
  FakeDeviceEngine engine;
  engine.fail = true;
  absl::Status s;
  std::vector<BlockOutcome> out = Run(true, src, Chain(3), &s, &engine);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(out.size(), 3u);
  for (const BlockOutcome& o : out) EXPECT_FALSE(o.status.ok());
  EXPECT_NE(out[0].status.message().find("injected"), std::string::npos) << out[0].status;
  absl::StatusOr<LookupResult> r = cache_->Lookup(ns_, {Key(0)}, false, absl::ZeroDuration());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->blocks.empty());

  engine.fail = false;
  Run(true, src, Chain(3), &s, &engine);
  ASSERT_TRUE(s.ok());
  engine.fail = true;
  out = Run(false, dst, Chain(3), &s, &engine);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(out.size(), 3u);
  for (const BlockOutcome& o : out) {
    EXPECT_EQ(o.status.code(), absl::StatusCode::kInternal) << o.status;
    EXPECT_EQ(o.bytes, 0u);
  }
}

// Device loads cannot hash their destination, so the cache's bytes are
// verified before the copy: a corrupt block is NOT_FOUND and dropped.
TEST_F(RegionCopyTest, DeviceLoadsNeverDeliverACorruptBlock) {
  VectorRegion src(3 * kBlock, MemoryKind::kDevice), dst(3 * kBlock, MemoryKind::kDevice);
  FillPattern(src.bytes(), 9);
  FakeDeviceEngine engine;
  absl::Status s;
  Run(true, src, Chain(3), &s, &engine);
  ASSERT_TRUE(s.ok());
  absl::StatusOr<absl::Span<uint8_t>> bytes = cache_->MutableBytesForTesting(ns_, Key(2));
  ASSERT_TRUE(bytes.ok());
  (*bytes)[7] ^= 0x80;
  std::vector<BlockOutcome> out = Run(false, dst, Chain(3), &s, &engine);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_TRUE(out[1].status.ok());
  EXPECT_EQ(out[2].status.code(), absl::StatusCode::kNotFound) << out[2].status;
  EXPECT_EQ(std::memcmp(dst.bytes().data(), src.bytes().data(), 2 * kBlock), 0);
  EXPECT_EQ(cache_->Snapshot().counters.checksum_mismatches, 1u);
}

// A storage encoding for the plumbing: stored = "RV" + the plain bytes
// reversed. Decode refuses anything without the header.
class ReverseTransform final : public BlockTransform {
 public:
  explicit ReverseTransform(uint64_t plain) : plain_(plain) {}
  std::string Describe() const override { return "reverse"; }
  uint64_t plain_bytes() const override { return plain_; }
  uint64_t stored_bytes() const override { return plain_ + 2; }
  absl::Status Encode(absl::Span<const uint8_t> plain, absl::Span<uint8_t> stored) override {
    if (plain.size() != plain_ || stored.size() != plain_ + 2) return absl::InternalError("size");
    stored[0] = 'R';
    stored[1] = 'V';
    std::reverse_copy(plain.begin(), plain.end(), stored.begin() + 2);
    ++encoded;
    return absl::OkStatus();
  }
  absl::Status Decode(absl::Span<const uint8_t> stored, absl::Span<uint8_t> plain) override {
    if (stored.size() != plain_ + 2 || stored[0] != 'R' || stored[1] != 'V') {
      return absl::DataLossError("not a reversed block");
    }
    std::reverse_copy(stored.begin() + 2, stored.end(), plain.begin());
    ++decoded;
    return absl::OkStatus();
  }
  Stats stats() const override { return {encoded, 0, 0}; }
  uint64_t encoded = 0, decoded = 0;

 private:
  const uint64_t plain_;
};

// Encoded namespaces: the tiers hold the stored form, engines get the plain
// block back, in host and device regions alike.
TEST_F(RegionCopyTest, TransformsEncodeOnSaveAndDecodeOnLoad) {
  ReverseTransform t(kBlock);
  FakeDeviceEngine engine;
  for (MemoryKind kind : {MemoryKind::kHost, MemoryKind::kDevice}) {
    SCOPED_TRACE(kind == MemoryKind::kHost ? "host" : "device");
    VectorRegion src(3 * kBlock, kind), dst(3 * kBlock, kind);
    FillPattern(src.bytes(), kind == MemoryKind::kHost ? 31 : 32);
    const int first = kind == MemoryKind::kHost ? 0 : 3;  // device chains on from host
    absl::Status s;
    std::vector<BlockOutcome> out = Run(true, src, Chain(3, first), &s, &engine, &t);
    ASSERT_TRUE(s.ok()) << s;
    for (const BlockOutcome& o : out) EXPECT_TRUE(o.status.ok()) << o.status;
    absl::StatusOr<absl::Span<uint8_t>> stored = cache_->MutableBytesForTesting(ns_, Key(first));
    ASSERT_TRUE(stored.ok());
    ASSERT_EQ(stored->size(), kBlock + 2);
    EXPECT_EQ((*stored)[0], 'R');
    EXPECT_EQ((*stored)[2], src.bytes()[kBlock - 1]);  // reversed
    out = Run(false, dst, Chain(3, first), &s, &engine, &t);
    ASSERT_TRUE(s.ok()) << s;
    for (const BlockOutcome& o : out) {
      EXPECT_TRUE(o.status.ok()) << o.status;
      EXPECT_EQ(o.bytes, kBlock);
    }
    EXPECT_EQ(std::memcmp(dst.bytes().data(), src.bytes().data(), 3 * kBlock), 0);
  }
  EXPECT_EQ(t.encoded, 6u);
  EXPECT_EQ(t.decoded, 6u);
}

TEST_F(RegionCopyTest, TransformsTakeWholeBlocksAndRefuseWhatDoesNotDecode) {
  ReverseTransform t(kBlock);
  VectorRegion src(3 * kBlock), dst(3 * kBlock);
  FillPattern(src.bytes(), 4);
  std::vector<RegionBlock> half = Chain(1);
  half[0].size = kBlock / 2;
  absl::Status s;
  std::vector<BlockOutcome> out = Run(true, src, half, &s, nullptr, &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("whole blocks"), std::string::npos) << s;
  EXPECT_EQ(t.encoded, 0u);
  // A block stored without the encoding (a bug, or a wrong namespace) is
  // DATA_LOSS, not garbage in the region.
  out = Run(true, src, Chain(2), &s);
  ASSERT_TRUE(s.ok());
  out = Run(false, dst, Chain(2), &s, nullptr, &t);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(out.size(), 2u);
  for (const BlockOutcome& o : out) {
    EXPECT_EQ(o.status.code(), absl::StatusCode::kDataLoss) << o.status;
    EXPECT_EQ(o.bytes, 0u);
  }
  EXPECT_TRUE(
      std::all_of(dst.bytes().begin(), dst.bytes().end(), [](uint8_t b) { return b == 0; }));
}

// The GPU data path under injected copy faults (refused batches, failed
// completions, latency spikes): no false OK, every OK block byte-exact, the
// same seed gives the same faults, and all is well once faults stop.
TEST_F(RegionCopyTest, DeviceCopiesUnderInjectedFaults) {
  auto run = [&](uint64_t seed, int first_key, CopyFaultCounts* counts) {
    FakeDeviceEngine device;
    FaultInjectingCopyEngine engine(&device, {0.2, 0.3, 0.2, absl::Milliseconds(1), seed});
    int ok = 0, failed = 0;
    for (int round = 0; round < 20; ++round) {
      const int first = first_key + round * 4;
      VectorRegion src(4 * kBlock, MemoryKind::kDevice), dst(4 * kBlock, MemoryKind::kDevice);
      FillPattern(src.bytes(), first);
      std::vector<RegionBlock> blocks;
      for (int i = 0; i < 4; ++i) {
        blocks.push_back(
            {Key(first + i), i ? Key(first + i - 1) : BlockKey(), i * kBlock, kBlock, {}});
      }
      absl::Status s;
      std::vector<BlockOutcome> saved = Run(true, src, blocks, &s, &engine);
      EXPECT_TRUE(s.ok()) << s;
      std::vector<BlockOutcome> loaded = Run(false, dst, blocks, &s, &engine);
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_EQ(loaded.size(), 4u);
      for (const BlockOutcome& o : loaded) {
        if (!o.status.ok()) {
          ++failed;
          EXPECT_EQ(o.bytes, 0u);
          continue;
        }
        ++ok;
        // An OK block was saved OK and its bytes are exact.
        EXPECT_TRUE(saved[o.index].status.ok());
        EXPECT_EQ(std::memcmp(dst.bytes().data() + o.index * kBlock,
                              src.bytes().data() + o.index * kBlock, kBlock),
                  0)
            << "block " << first + static_cast<int>(o.index);
      }
    }
    EXPECT_GT(ok, 0);
    EXPECT_GT(failed, 0);
    *counts = engine.counts();
    // Faults stop: everything works again.
    engine.SetPlan({});
    VectorRegion src(kBlock, MemoryKind::kDevice), dst(kBlock, MemoryKind::kDevice);
    FillPattern(src.bytes(), 999);
    const std::vector<RegionBlock> one = {{Key(first_key + 1000), BlockKey(), 0, kBlock, {}}};
    absl::Status s;
    EXPECT_TRUE(Run(true, src, one, &s, &engine)[0].status.ok());
    EXPECT_TRUE(Run(false, dst, one, &s, &engine)[0].status.ok());
    EXPECT_EQ(std::memcmp(dst.bytes().data(), src.bytes().data(), kBlock), 0);
  };
  CopyFaultCounts a, b;
  run(7, 10000, &a);
  run(7, 20000, &b);  // same seed, same faults
  EXPECT_EQ(a.refused, b.refused);
  EXPECT_EQ(a.failed_completions, b.failed_completions);
  EXPECT_EQ(a.latency_spikes, b.latency_spikes);
  EXPECT_GT(a.refused + a.failed_completions, 0u);
}

}  // namespace
}  // namespace kvtier
