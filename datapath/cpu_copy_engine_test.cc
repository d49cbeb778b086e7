#include "datapath/cpu_copy_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "testing/test_bytes.h"

namespace kvtier {
namespace {

TEST(CpuCopyEngineTest, CopiesEveryOpOfABatchAndCompletesOnce) {
  auto engine = CpuCopyEngine::Create(3);
  ASSERT_TRUE(engine.ok()) << engine.status();
  // Sizes straddle the 1 MiB piece size so single ops are split too.
  const std::vector<size_t> sizes = {
      1, 17, 4096, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 5, 32768};
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  std::vector<uint8_t> src = DeterministicBytes("1", total), dst(total, 0);
  CopyBatch batch;
  // Scatter in reverse order, so a wrong offset shows.
  size_t at = 0, back = total;
  for (size_t n : sizes) {
    back -= n;
    batch.ops.push_back({dst.data() + back, src.data() + at, n});
    at += n;
  }
  std::atomic<int> calls{0};
  Notification finished;
  absl::Status result = absl::UnknownError("not called");
  ASSERT_TRUE((*engine)
                  ->Submit(batch,
                           [&](absl::Status s) {
                             result = s;
                             if (calls.fetch_add(1) == 0) finished.Notify();
                           })
                  .ok());
  finished.WaitForNotification();
  EXPECT_TRUE(result.ok()) << result;
  engine->reset();  // drains; a second call would show now
  EXPECT_EQ(calls.load(), 1);
  at = 0;
  back = total;
  for (size_t n : sizes) {
    back -= n;
    EXPECT_EQ(std::memcmp(dst.data() + back, src.data() + at, n), 0) << "op of " << n << " bytes";
    at += n;
  }
}

TEST(CpuCopyEngineTest, RefusesDeviceMemoryAndBadOpsWithoutCallingDone) {
  auto engine = CpuCopyEngine::Create(1);
  ASSERT_TRUE(engine.ok());
  bool called = false;
  auto done = [&](absl::Status) { called = true; };
  std::vector<uint8_t> a(64), b(64);
  CopyBatch device;
  device.src_kind = MemoryKind::kDevice;
  device.ops.push_back({a.data(), b.data(), 64});
  EXPECT_EQ((*engine)->Submit(device, done).code(), absl::StatusCode::kFailedPrecondition);
  CopyBatch null_ptr;
  null_ptr.ops.push_back({nullptr, b.data(), 64});
  EXPECT_EQ((*engine)->Submit(null_ptr, done).code(), absl::StatusCode::kInvalidArgument);
  CopyBatch overlap;
  overlap.ops.push_back({a.data() + 8, a.data(), 16});
  EXPECT_EQ((*engine)->Submit(overlap, done).code(), absl::StatusCode::kInvalidArgument);
  CopyBatch negative_device;
  negative_device.device = -1;
  EXPECT_EQ((*engine)->Submit(negative_device, done).code(), absl::StatusCode::kInvalidArgument);
  engine->reset();
  EXPECT_FALSE(called);
  EXPECT_EQ(CpuCopyEngine::Create(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CpuCopyEngine::Create(CpuCopyEngine::kMaxThreads + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CpuCopyEngineTest, EmptyBatchCompletesOk) {
  auto engine = CpuCopyEngine::Create(2);
  ASSERT_TRUE(engine.ok());
  CopyBatch empty;
  empty.ops.push_back({nullptr, nullptr, 0});  // zero-byte ops are ignored
  EXPECT_TRUE((*engine)->CopySync(empty).ok());
}

TEST(CpuCopyEngineTest, DestructorRunsEveryAcceptedCompletion) {
  std::atomic<int> completed{0};
  constexpr int kBatches = 200;
  std::vector<uint8_t> src = DeterministicBytes("2", 1 << 16);
  std::vector<std::vector<uint8_t>> dst(kBatches, std::vector<uint8_t>(src.size()));
  {
    auto engine = CpuCopyEngine::Create(2);
    ASSERT_TRUE(engine.ok());
    for (int i = 0; i < kBatches; ++i) {
      CopyBatch b;
      b.ops.push_back({dst[i].data(), src.data(), src.size()});
      ASSERT_TRUE((*engine)->Submit(b, [&](absl::Status s) { completed += s.ok(); }).ok());
    }
  }
  EXPECT_EQ(completed.load(), kBatches);
  for (int i = 0; i < kBatches; ++i) ASSERT_EQ(dst[i], src) << i;
}

TEST(CpuCopyEngineTest, ConcurrentSubmittersEachGetTheirBytes) {
  auto engine = CpuCopyEngine::Create(2);
  ASSERT_TRUE(engine.ok());
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<uint8_t> src = DeterministicBytes(absl::StrCat(t * 1000 + r), 3000 + 97 * r),
                             dst(src.size());
        CopyBatch b;
        b.ops.push_back({dst.data(), src.data(), 1000});
        b.ops.push_back({dst.data() + 1000, src.data() + 1000, src.size() - 1000});
        if (!(*engine)->CopySync(b).ok() || dst != src) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace kvtier
