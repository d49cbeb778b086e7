// The gather/scatter kernel: one launch copies a whole batch of byte ranges
// between device (or device-mapped) addresses. Each CUDA block takes ops in
// turn; threads copy 16-byte words when an op's addresses and size allow it,
// bytes otherwise.
//
// Thread-safety: launches are stream-ordered; callers own the stream.
#ifndef KVTIER_GPU_CUDA_COPY_KERNEL_H_
#define KVTIER_GPU_CUDA_COPY_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kvtier {

struct DeviceCopyDesc {
  uint64_t dst;
  uint64_t src;
  uint64_t bytes;
};

// `descs` is device memory holding `count` descriptors.
cudaError_t LaunchCopyKernel(const DeviceCopyDesc* descs, size_t count, cudaStream_t stream);

}  // namespace kvtier

#endif  // KVTIER_GPU_CUDA_COPY_KERNEL_H_
