#include <algorithm>

#include "gpu/cuda/copy_kernel.h"

namespace kvtier {
namespace {

constexpr int kUnroll = 4;

__global__ void CopyKernel(const DeviceCopyDesc* descs, size_t count) {
  for (size_t op = blockIdx.x; op < count; op += gridDim.x) {
    const DeviceCopyDesc d = descs[op];
    auto* dst = reinterpret_cast<unsigned char*>(d.dst);
    const auto* src = reinterpret_cast<const unsigned char*>(d.src);
    if (((d.dst | d.src | d.bytes) & 15) == 0) {
      auto* dst4 = reinterpret_cast<uint4*>(dst);
      const auto* src4 = reinterpret_cast<const uint4*>(src);
      const uint64_t words = d.bytes / 16;
      const uint64_t stride = blockDim.x;
      uint64_t i = threadIdx.x;
      // kUnroll independent loads in flight per thread before any store:
      // one load at a time leaves HBM waiting on latency.
      for (; i + (kUnroll - 1) * stride < words; i += kUnroll * stride) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = src4[i + u * stride];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) dst4[i + u * stride] = v[u];
      }
      for (; i < words; i += stride) dst4[i] = src4[i];
    } else {
      for (uint64_t i = threadIdx.x; i < d.bytes; i += blockDim.x) dst[i] = src[i];
    }
  }
}

}  // namespace

cudaError_t LaunchCopyKernel(const DeviceCopyDesc* descs, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>(count, 4096));
  CopyKernel<<<blocks, 256, 0, stream>>>(descs, count);
  return cudaGetLastError();
}

}  // namespace kvtier
