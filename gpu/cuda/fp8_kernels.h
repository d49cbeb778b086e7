// Launchers of the fp8 kernels (fp8_kernels.cu), kept free of abseil so that
// nvcc compiles only CUDA and the scalar headers; fp8_device_cuda.cc wraps
// them in the Status-returning API of gpu/fp8_device.h.
//
// Thread-safety: launches are stream-ordered; callers own the stream.
#ifndef KVTIER_GPU_CUDA_FP8_KERNELS_H_
#define KVTIER_GPU_CUDA_FP8_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "encoding/fp8_geometry.h"

namespace kvtier {

// `clipped` is a device counter the kernel adds its clipped values to.
cudaError_t LaunchFp8Encode(const fp8::Geometry& g, const void* plain, void* encoded, size_t count,
                            unsigned long long* clipped, cudaStream_t stream);
cudaError_t LaunchFp8Decode(const fp8::Geometry& g, const void* encoded, void* plain, size_t count,
                            cudaStream_t stream);

}  // namespace kvtier

#endif  // KVTIER_GPU_CUDA_FP8_KERNELS_H_
