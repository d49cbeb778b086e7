// CreateCopyEngine: the CopyEngine this process should use. With a CUDA
// build and a usable GPU it is the CUDA backend for `device`; otherwise (no
// CUDA in the build, no driver, no GPU, or `prefer_cpu`) the CPU backend, and
// Capabilities().detail says why device memory is unavailable.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_GPU_COPY_ENGINE_FACTORY_H_
#define KVTIER_GPU_COPY_ENGINE_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "datapath/copy_engine.h"

namespace kvtier {

struct CopyEngineOptions {
  int device = 0;
  int cpu_threads = 0;  // CPU backend workers; 0 picks a default
  bool prefer_cpu = false;
};

absl::StatusOr<std::unique_ptr<CopyEngine>> CreateCopyEngine(const CopyEngineOptions& options);

}  // namespace kvtier

#endif  // KVTIER_GPU_COPY_ENGINE_FACTORY_H_
