#include "gpu/gpu_probe.h"

#include <gtest/gtest.h>

namespace kvtier {
namespace {

// Runs on every machine: without a GPU (or without CUDA in the build) the
// probe must report zero devices with a reason instead of failing; with GPUs
// it must describe each of them.
TEST(GpuProbeTest, ReportsDevicesOrWhyThereAreNone) {
  GpuInventory inv = ProbeGpus();
  if (inv.devices.empty()) {
    EXPECT_EQ(inv.detail.rfind("no GPU (", 0), 0u) << inv.detail;
  } else {
    EXPECT_NE(inv.detail.find("GPU(s)"), std::string::npos) << inv.detail;
    for (const GpuDevice& d : inv.devices) {
      EXPECT_FALSE(d.name.empty());
      EXPECT_GT(d.memory_bytes, 0u);
    }
  }
}

}  // namespace
}  // namespace kvtier
