// OpenCudaIpcRegion for builds without CUDA.
#include "gpu/cuda_ipc_region.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<MemoryRegion>> OpenCudaIpcRegion(const CudaIpcSpec& spec) {
  if (absl::Status s = ValidateCudaIpcSpec(spec); !s.ok()) return s;
  return absl::FailedPreconditionError(
      "CUDA IPC memory: this kvtierd was built without CUDA; register shared memory instead");
}

}  // namespace kvtier
