// CudaDeviceAllocator: device memory from cudaMalloc.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "gpu/cuda/cuda_status.h"
#include "gpu/device_pool.h"

namespace kvtier {
namespace {

class CudaAllocator final : public DeviceAllocator {
 public:
  absl::StatusOr<uint8_t*> Allocate(int device, uint64_t bytes) override {
    if (absl::Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) {
      return absl::FailedPreconditionError(s.message());
    }
    void* p = nullptr;
    if (absl::Status s = CudaStatus(cudaMalloc(&p, bytes), absl::StrCat("cudaMalloc of ", bytes,
                                                                        " bytes for the GPU tier"));
        !s.ok()) {
      return s;
    }
    return static_cast<uint8_t*>(p);
  }
  void Free(int device, uint8_t* p) override {
    cudaSetDevice(device);
    cudaFree(p);
  }
};

}  // namespace

std::unique_ptr<DeviceAllocator> CudaDeviceAllocator() { return std::make_unique<CudaAllocator>(); }

}  // namespace kvtier
