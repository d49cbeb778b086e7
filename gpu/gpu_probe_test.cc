#include "gpu/gpu_probe.h"

#include <gtest/gtest.h>

#include "gpu/fp8_device.h"

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

// Without a GPU the device fp8 calls refuse with the reason, touching no
// memory (the pointers are null); with one they are tested in gpu_device_test.
TEST(GpuProbeTest, DeviceFp8WithoutAGpuSaysWhy) {
  if (!ProbeGpus().devices.empty()) GTEST_SKIP() << "a GPU is present: see gpu_device_test";
  fp8::Geometry g{};
  absl::StatusOr<Fp8Stats> enc = EncodeFp8OnDevice(0, g, nullptr, nullptr, 1);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(enc.status().message().find("fp8 on the GPU"), std::string::npos);
  EXPECT_EQ(DecodeFp8OnDevice(0, g, nullptr, nullptr, 1).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kvtier
