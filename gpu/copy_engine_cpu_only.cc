// CreateCopyEngine for builds without CUDA: always the CPU backend.
#include "datapath/cpu_copy_engine.h"
#include "gpu/copy_engine_factory.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<CopyEngine>> CreateCopyEngine(const CopyEngineOptions& options) {
  absl::StatusOr<std::unique_ptr<CpuCopyEngine>> cpu = CpuCopyEngine::Create(options.cpu_threads);
  if (!cpu.ok()) return cpu.status();
  return std::unique_ptr<CopyEngine>(std::move(*cpu));
}

}  // namespace kvtier
