// CreateCopyEngine picks the CUDA engine where a GPU answers, the CPU engine
// otherwise (and when asked to prefer it).
#include "gpu/copy_engine_factory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "testing/test_bytes.h"

namespace kvtier {
namespace {

TEST(CopyEngineFactoryTest, PicksABackendThatWorksHere) {
  absl::StatusOr<std::unique_ptr<CopyEngine>> engine = CreateCopyEngine({});
  ASSERT_TRUE(engine.ok()) << engine.status();
  const CopyEngineCapabilities caps = (*engine)->Capabilities();
  if (caps.device_memory) {
    EXPECT_EQ(caps.name, "cuda");
  } else {
    EXPECT_EQ(caps.name, "cpu");
    EXPECT_FALSE(caps.detail.empty());
  }
  std::vector<uint8_t> src = DeterministicBytes("3", 5000), dst(5000);
  CopyBatch b;
  b.ops.push_back({dst.data(), src.data(), src.size()});
  EXPECT_TRUE((*engine)->CopySync(b).ok());
  EXPECT_EQ(dst, src);
  absl::StatusOr<std::unique_ptr<CopyEngine>> cpu = CreateCopyEngine({.prefer_cpu = true});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->Capabilities().name, "cpu");
}

}  // namespace
}  // namespace kvtier
