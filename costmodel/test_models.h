// Shapes shared by the costmodel tests: a toy model small enough to check by
// hand, and a deployment helper.
#ifndef KVTIER_COSTMODEL_TEST_MODELS_H_
#define KVTIER_COSTMODEL_TEST_MODELS_H_

#include <string>

#include "costmodel/catalog.h"
#include "costmodel/deployment.h"
#include "costmodel/hf_config.h"
#include "gtest/gtest.h"

namespace kvtier::costmodel {

// 2 layers, hidden 8, 2 query heads, 1 KV head of dim 4, MLP 16, vocab 10,
// tied embeddings. Parameters: embedding 10*8 = 80; norms 2*8*2 + 8 = 40;
// attention per layer q 8*8 + k,v 2*8*4 + o 8*8 = 192; MLP 3*8*16 = 384.
// Total = 80 + 40 + 2*192 + 2*384 = 1272 (all active, tied); prefill =
// max(1272 - 80, 636) = 1192.
inline ModelSpec ToyModel() { return DenseModel("toy", 2, 8, 2, 1, 4, 16, 10, true); }

// A GPU with round numbers: 1e12 FLOP/s, 100 GB, 1e12 B/s HBM, 1e10 B/s host link.
inline GpuSpec ToyGpu() { return GpuSpec{"toy-gpu", 100e9, 1e12, 2e12, 1e12, 1e10, "toy"}; }

inline Deployment Deploy(const ModelSpec& m, const GpuSpec& g, uint32_t tp = 1, double kv_bytes = 2,
                         uint32_t block_tokens = 16, double mfu = 0.5) {
  Deployment d;
  d.model = m;
  d.gpu = g;
  d.tp = tp;
  d.kv_bytes_per_element = kv_bytes;
  d.block_tokens = block_tokens;
  d.mfu = mfu;
  EXPECT_TRUE(d.Validate().ok()) << d.Validate();
  return d;
}

inline Deployment Catalog(const std::string& model, const std::string& gpu, uint32_t tp = 1) {
  return Deploy(*CatalogModel(model), *CatalogGpu(gpu), tp);
}

inline ModelSpec TestConfig(const std::string& file) {
  absl::StatusOr<ModelSpec> m =
      ModelSpecFromHfConfigFile(std::string(KVTIER_TESTDATA) + "/" + file);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec{};
}

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_TEST_MODELS_H_
