// DeviceRegion: a MemoryRegion of GPU memory made of one or more engine
// tensors (vLLM registers one KV tensor per layer), laid end to end in one
// address space: tensor i occupies [start_i, start_i + size_i). A range must
// lie inside one tensor. The memory is released by the `release` callback
// when the region is destroyed (cudaIpcCloseMemHandle for CUDA IPC).
//
// Thread-safety: immutable after construction; any thread may call Address.
#ifndef KVTIER_GPU_DEVICE_REGION_H_
#define KVTIER_GPU_DEVICE_REGION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "datapath/memory_region.h"

namespace kvtier {

class DeviceRegion final : public MemoryRegion {
 public:
  struct Tensor {
    uint8_t* base = nullptr;  // device address of the tensor's first byte
    uint64_t size = 0;
  };

  // `what` describes the region for logs ("CUDA IPC, 32 tensors").
  DeviceRegion(int device, std::vector<Tensor> tensors, std::string what,
               std::function<void()> release);
  ~DeviceRegion() override;
  DeviceRegion(const DeviceRegion&) = delete;
  DeviceRegion& operator=(const DeviceRegion&) = delete;

  uint64_t size() const override { return size_; }
  MemoryKind kind() const override { return MemoryKind::kDevice; }
  int device() const override { return device_; }
  absl::StatusOr<uint8_t*> Address(uint64_t offset, uint64_t size) override;
  std::string Describe() const override;

  // Where tensor i starts in the region's address space.
  uint64_t tensor_start(size_t i) const { return starts_[i]; }

 private:
  const int device_;
  const std::vector<Tensor> tensors_;
  std::vector<uint64_t> starts_;
  uint64_t size_ = 0;
  const std::string what_;
  std::function<void()> release_;
};

}  // namespace kvtier

#endif  // KVTIER_GPU_DEVICE_REGION_H_
