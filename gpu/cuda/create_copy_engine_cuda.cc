// CreateCopyEngine for CUDA builds: the CUDA backend when the GPU is usable,
// else the CPU backend with the reason.
#include "base/status_macros.h"
#include "datapath/cpu_copy_engine.h"
#include "gpu/copy_engine_factory.h"
#include "gpu/cuda/cuda_copy_engine.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<CopyEngine>> CreateCopyEngine(const CopyEngineOptions& options) {
  std::string why = "the CPU backend was asked for";
  if (!options.prefer_cpu) {
    absl::StatusOr<std::unique_ptr<CudaCopyEngine>> cuda =
        CudaCopyEngine::Create(options.device, options.cpu_threads);
    if (cuda.ok()) return std::unique_ptr<CopyEngine>(std::move(*cuda));
    why = absl::StrCat("no GPU (", cuda.status().message(), ")");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CpuCopyEngine> cpu,
                   CpuCopyEngine::Create(options.cpu_threads, why));
  return std::unique_ptr<CopyEngine>(std::move(cpu));
}

}  // namespace kvtier
