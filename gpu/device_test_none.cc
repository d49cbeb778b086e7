// The GPU tests in a build without CUDA: one test that says so and skips.
#include <gtest/gtest.h>

TEST(GpuDeviceTest, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA (KVTIER_WITH_CUDA=OFF or no toolkit found)";
}
