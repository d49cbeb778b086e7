// OpenCudaIpcRegion: imports an engine's GPU tensors, shared by CUDA IPC
// handles (cudaIpcGetMemHandle in the engine), as one DeviceRegion. Each
// tensor is (handle, offset, size): the registered bytes are
// [offset, offset + size) of the allocation the handle names. The handles
// are closed when the region is destroyed (UnregisterMemory, or its owner
// process exiting).
//
// Errors: INVALID_ARGUMENT for a malformed spec (checked before any CUDA
// call: no tensors, more than kMaxIpcTensors, a handle that is not
// kCudaIpcHandleBytes long, a zero size, a negative device);
// FAILED_PRECONDITION where this build has no CUDA or the device is not
// usable; the CUDA error (INVALID_ARGUMENT for a stale handle) otherwise.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_GPU_CUDA_IPC_REGION_H_
#define KVTIER_GPU_CUDA_IPC_REGION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datapath/memory_region.h"

namespace kvtier {

inline constexpr size_t kCudaIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
inline constexpr size_t kMaxIpcTensors = 4096;

struct CudaIpcTensorSpec {
  std::string handle;  // kCudaIpcHandleBytes bytes
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct CudaIpcSpec {
  int device = 0;
  std::vector<CudaIpcTensorSpec> tensors;
};

absl::Status ValidateCudaIpcSpec(const CudaIpcSpec& spec);

absl::StatusOr<std::unique_ptr<MemoryRegion>> OpenCudaIpcRegion(const CudaIpcSpec& spec);

}  // namespace kvtier

#endif  // KVTIER_GPU_CUDA_IPC_REGION_H_
