// Deployment: the inputs every planner question shares: a model, a GPU, the
// tensor-parallel size, the KV element size, the block size and the prefill
// utilisation (MFU).
//
// Thread-safety: plain values.
#ifndef KVTIER_COSTMODEL_DEPLOYMENT_H_
#define KVTIER_COSTMODEL_DEPLOYMENT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "costmodel/hardware.h"
#include "costmodel/model_spec.h"

namespace kvtier::costmodel {

struct Deployment {
  ModelSpec model;
  GpuSpec gpu;
  uint32_t tp = 1;
  double kv_bytes_per_element = 2;  // bf16 2, fp8 1
  uint32_t block_tokens = 16;
  double mfu = 0.5;
  bool fp8_compute = false;  // prefill matmuls in FP8 (e.g. DeepSeek-V3)

  // INVALID_ARGUMENT for an invalid model, a TP size that does not divide
  // (or is not a multiple of) the KV head count, or a non-positive GPU
  // figure, MFU outside (0, 1], or block size.
  absl::Status Validate() const;

  // Effective prefill FLOP/s of the TP group: tp * peak * mfu.
  double GroupFlops() const;
};

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_DEPLOYMENT_H_
