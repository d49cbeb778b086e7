// Test-only: HostDeviceAllocator, "device" memory that is host memory, so a
// DevicePool can run (with testing/test_copy_engine.h's FakeDeviceEngine)
// on machines without a GPU.
#ifndef KVTIER_TESTING_TEST_DEVICE_ALLOCATOR_H_
#define KVTIER_TESTING_TEST_DEVICE_ALLOCATOR_H_

#include <cstdlib>

#include "gpu/device_pool.h"

namespace kvtier {

class HostDeviceAllocator final : public DeviceAllocator {
 public:
  absl::StatusOr<uint8_t*> Allocate(int, uint64_t bytes) override {
    void* p = std::calloc(1, bytes);
    if (p == nullptr) return absl::ResourceExhaustedError("calloc");
    return static_cast<uint8_t*>(p);
  }
  void Free(int, uint8_t* p) override { std::free(p); }
};

}  // namespace kvtier

#endif  // KVTIER_TESTING_TEST_DEVICE_ALLOCATOR_H_
