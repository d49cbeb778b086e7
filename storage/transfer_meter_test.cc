#include "storage/transfer_meter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "storage/tier_probe.h"

namespace kvtier {
namespace {

TEST(TransferMeterTest, SeedThenEwmaTowardsTransfers) {
  TransferMeter m(0.5);
  EXPECT_EQ(m.Estimate().bytes_per_s, 0);
  EXPECT_EQ(m.Estimate().source, "none");
  m.Seed(1e9, 1e-3, "probe");
  // 1 MB in 2 ms with 1 ms latency: a 1 GB/s sample.
  m.Record(1'000'000, absl::Milliseconds(2));
  EXPECT_DOUBLE_EQ(m.Estimate().bytes_per_s, 1e9);
  // 1 MB in 1.5 ms: 2 GB/s; halfway with alpha 0.5.
  m.Record(1'000'000, absl::Microseconds(1500));
  EXPECT_DOUBLE_EQ(m.Estimate().bytes_per_s, 1.5e9);
  EXPECT_EQ(m.Estimate().samples, 2u);
  EXPECT_EQ(m.Estimate().latency_s, 1e-3);
  m.Record(0, absl::Seconds(1));  // ignored
  EXPECT_EQ(m.Estimate().samples, 2u);
  // Faster than the latency: counted as latency / 2, never infinite.
  m.Record(1'000, absl::ZeroDuration());
  // 1000 bytes over latency / 2 = 0.5 ms: a 2 MB/s sample, halfway from 1.5 GB/s.
  EXPECT_DOUBLE_EQ(m.Estimate().bytes_per_s, 0.5 * 1.5e9 + 0.5 * 2e6);
  m.Seed(5e9, 0, "configured");
  EXPECT_EQ(m.Estimate().samples, 0u);
  EXPECT_EQ(m.Estimate().bytes_per_s, 5e9);
}

TEST(TransferMeterTest, FirstTransferSetsAnUnseededMeter) {
  TransferMeter m;
  m.Record(4'000'000, absl::Milliseconds(1));
  EXPECT_DOUBLE_EQ(m.Estimate().bytes_per_s, 4e9);
  EXPECT_EQ(m.Estimate().source, "transfers");
}

TEST(TierProbeTest, MemoryAndDirectReadProbes) {
  const TransferEstimate mem = ProbeMemoryCopy(8 << 20);
  EXPECT_GT(mem.bytes_per_s, 1e8);  // any machine copies faster than 100 MB/s
  char tmpl[] = "/tmp/kvtier-probe-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  absl::StatusOr<TransferEstimate> disk = ProbeDirectRead(dir, 2 << 20);
  ASSERT_TRUE(disk.ok()) << disk.status();
  EXPECT_GT(disk->bytes_per_s, 0);
  EXPECT_EQ(disk->source, "probe");
  EXPECT_EQ(::rmdir(dir.c_str()), 0);  // the probe file is gone
  EXPECT_EQ(ProbeDirectRead("/nonexistent-dir", 1 << 20).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kvtier
