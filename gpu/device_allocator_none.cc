// CudaDeviceAllocator for builds without CUDA: every allocation fails.
#include "gpu/device_pool.h"

namespace kvtier {
namespace {

class NoDeviceAllocator final : public DeviceAllocator {
 public:
  absl::StatusOr<uint8_t*> Allocate(int, uint64_t) override {
    return absl::FailedPreconditionError("GPU tier: this build has no CUDA");
  }
  void Free(int, uint8_t*) override {}
};

}  // namespace

std::unique_ptr<DeviceAllocator> CudaDeviceAllocator() {
  return std::make_unique<NoDeviceAllocator>();
}

}  // namespace kvtier
