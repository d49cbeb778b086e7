// OpenCudaIpcRegion for builds without CUDA.
#include "base/status_macros.h"
#include "gpu/cuda_ipc_region.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<MemoryRegion>> OpenCudaIpcRegion(const CudaIpcSpec& spec) {
  RETURN_IF_ERROR(ValidateCudaIpcSpec(spec));
  return absl::FailedPreconditionError(
      "CUDA IPC memory: this kvtierd was built without CUDA; register shared memory instead");
}

}  // namespace kvtier
