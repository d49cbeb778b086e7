#include "costmodel/catalog.h"

#include <cmath>

#include "costmodel/test_models.h"
#include "gtest/gtest.h"

namespace kvtier::costmodel {
namespace {

TEST(CatalogTest, ComputedParameterCountsMatchPublishedCounts) {
  for (const std::string& name : CatalogModelNames()) {
    SCOPED_TRACE(name);
    ModelSpec m = *CatalogModel(name);
    ASSERT_TRUE(m.Validate().ok()) << m.Validate();
    ASSERT_GT(m.published_total_params, 0);
    const ParameterCounts c = m.ComputedParameters();
    EXPECT_NEAR(c.total / m.published_total_params, 1.0, 0.015);
    if (m.published_active_params > 0) {
      EXPECT_NEAR(c.active / m.published_active_params, 1.0, 0.015);
    }
  }
}

TEST(CatalogTest, Llama8bCountByHand) {
  // embedding 128256*4096 = 525,336,576 (and as many for the untied head);
  // per layer: q,o 2*4096^2 + k,v 2*4096*1024 + MLP 3*4096*14336 + norms
  // 2*4096 = 218,112,000; 32 layers + final norm 4096.
  const ParameterCounts c = CatalogModel("llama-3.1-8b")->Parameters();
  EXPECT_DOUBLE_EQ(c.total, 2 * 525336576.0 + 32 * 218112000.0 + 4096);
  EXPECT_DOUBLE_EQ(c.active, c.total - 525336576.0);
  EXPECT_DOUBLE_EQ(c.prefill, c.total - 2 * 525336576.0);
}

TEST(CatalogTest, OverridesWin) {
  ModelSpec m = *CatalogModel("llama-3.1-8b");
  m.total_params_override = 9e9;
  m.active_params_override = 2e9;
  EXPECT_EQ(m.Parameters().total, 9e9);
  EXPECT_EQ(m.Parameters().active, 2e9);
  m.active_params_override = 0;
  EXPECT_FALSE(m.Validate().ok());
}

TEST(CatalogTest, ToyModelCountByHand) {
  const ParameterCounts c = ToyModel().Parameters();
  EXPECT_DOUBLE_EQ(c.total, 1272);
  EXPECT_DOUBLE_EQ(c.active, 1272);
  EXPECT_DOUBLE_EQ(c.prefill, 1192);
}

TEST(CatalogTest, EveryRequiredEntryExists) {
  for (const char* m : {"llama-3.1-8b", "llama-3.1-70b", "llama-3.2-1b", "qwen2.5-7b",
                        "deepseek-v3", "gpt-oss-120b"}) {
    EXPECT_TRUE(CatalogModel(m).ok()) << m;
  }
  for (const char* g : {"h100-sxm", "h200", "a100-80gb", "l40s", "b200"}) {
    absl::StatusOr<GpuSpec> gpu = CatalogGpu(g);
    ASSERT_TRUE(gpu.ok()) << g;
    EXPECT_GT(gpu->memory_bytes, 0);
    EXPECT_GT(gpu->bf16_flops, 0);
    EXPECT_GT(gpu->hbm_bytes_per_s, 0);
    EXPECT_GT(gpu->host_link_bytes_per_s, 0);
  }
  for (const char* l : {"pcie4", "pcie5", "nic-100g", "nic-200g", "nic-400g", "nvlink4"}) {
    EXPECT_TRUE(CatalogLink(l).ok()) << l;
  }
  EXPECT_GE(CatalogSsdNames().size(), 3u);
  EXPECT_EQ(CatalogLink("nic-400g")->bytes_per_s, 50e9);  // 400 Gb/s / 8
}

TEST(CatalogTest, UnknownNamesListTheCatalog) {
  absl::StatusOr<ModelSpec> m = CatalogModel("llama-9");
  ASSERT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("llama-3.1-8b"), std::string::npos);
  EXPECT_EQ(CatalogGpu("H100-SXM")->name, "h100-sxm");  // case-insensitive
}

TEST(CatalogTest, DeviceNamesMapToCatalogGpus) {
  EXPECT_EQ(CatalogGpuForDevice("NVIDIA H100 80GB HBM3")->name, "h100-sxm");
  EXPECT_EQ(CatalogGpuForDevice("NVIDIA H200")->name, "h200");
  EXPECT_EQ(CatalogGpuForDevice("NVIDIA A100-SXM4-80GB")->name, "a100-80gb");
  EXPECT_FALSE(CatalogGpuForDevice("NVIDIA H100 PCIe").ok());
  EXPECT_FALSE(CatalogGpuForDevice("Tesla T4").ok());
}

}  // namespace
}  // namespace kvtier::costmodel
