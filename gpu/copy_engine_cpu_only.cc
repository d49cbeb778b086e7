// CreateCopyEngine for builds without CUDA: always the CPU backend.
#include "base/status_macros.h"
#include "datapath/cpu_copy_engine.h"
#include "gpu/copy_engine_factory.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<CopyEngine>> CreateCopyEngine(const CopyEngineOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CpuCopyEngine> cpu, CpuCopyEngine::Create(options.cpu_threads));
  return std::unique_ptr<CopyEngine>(std::move(cpu));
}

}  // namespace kvtier
