// OpenCudaIpcRegion through the CUDA runtime: cudaIpcOpenMemHandle per
// tensor (with lazy peer access), closed together when the region goes.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gpu/cuda/cuda_status.h"
#include "gpu/cuda_ipc_region.h"
#include "gpu/device_region.h"

namespace kvtier {
namespace {

// cuMemGetAddressRange, reached through the runtime (the binary does not
// link the driver library, so that it starts where there is none).
using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

absl::StatusOr<uint64_t> AllocationSize(void* base) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (absl::Status s =
          CudaStatus(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                                      cudaEnableDefault, &found),
                     "cudaGetDriverEntryPointByVersion");
      !s.ok()) {
    return s;
  }
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return absl::FailedPreconditionError("the CUDA driver has no cuMemGetAddressRange");
  }
  CUdeviceptr alloc_base = 0;
  size_t size = 0;
  if (reinterpret_cast<GetAddressRange>(fn)(&alloc_base, &size,
                                            reinterpret_cast<CUdeviceptr>(base)) != CUDA_SUCCESS) {
    return absl::InternalError("cuMemGetAddressRange failed on an imported CUDA IPC pointer");
  }
  return size - (reinterpret_cast<CUdeviceptr>(base) - alloc_base);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MemoryRegion>> OpenCudaIpcRegion(const CudaIpcSpec& spec) {
  RETURN_IF_ERROR(ValidateCudaIpcSpec(spec));
  int count = 0;
  if (absl::Status s = CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA IPC memory needs a GPU: ", s.message()));
  }
  if (spec.device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda_ipc.device ", spec.device, " does not exist (", count, " GPUs)"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(spec.device), "cudaSetDevice"));
  std::vector<void*> opened;
  auto close_all = [device = spec.device](const std::vector<void*>& ptrs) {
    cudaSetDevice(device);
    for (void* p : ptrs) cudaIpcCloseMemHandle(p);
  };
  std::vector<DeviceRegion::Tensor> tensors;
  for (size_t i = 0; i < spec.tensors.size(); ++i) {
    const CudaIpcTensorSpec& t = spec.tensors[i];
    cudaIpcMemHandle_t handle;
    static_assert(sizeof handle == kCudaIpcHandleBytes);
    std::memcpy(&handle, t.handle.data(), sizeof handle);
    void* base = nullptr;
    const cudaError_t err = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      close_all(opened);
      return CudaStatus(err, absl::StrCat("cudaIpcOpenMemHandle of cuda_ipc.tensors[", i, "]"));
    }
    opened.push_back(base);
    // The allocation must hold [offset, offset + size): a copy past its end
    // would fault the daemon's CUDA context.
    const absl::StatusOr<uint64_t> alloc_size = AllocationSize(base);
    if (!alloc_size.ok()) {
      close_all(opened);
      return alloc_size.status();
    }
    if (t.offset + t.size > *alloc_size) {
      close_all(opened);
      return absl::InvalidArgumentError(absl::StrCat("cuda_ipc.tensors[", i, "]: bytes [", t.offset,
                                                     ", +", t.size, ") exceed the allocation of ",
                                                     *alloc_size, " bytes"));
    }
    tensors.push_back({static_cast<uint8_t*>(base) + t.offset, t.size});
  }
  return std::unique_ptr<MemoryRegion>(
      new DeviceRegion(spec.device, std::move(tensors), "CUDA IPC memory",
                       [opened = std::move(opened), close_all]() { close_all(opened); }));
}

}  // namespace kvtier
