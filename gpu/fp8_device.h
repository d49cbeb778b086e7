// fp8 encoding on the GPU: the CUDA kernels behind the CPU reference in
// encoding/fp8_codec.h, which they must match byte for byte. Blocks are
// contiguous in device memory of `device`: plain block i at
// plain + i * block_bytes, encoded block i at encoded + i * encoded_bytes
// (sizes from the geometry). Calls wait for the kernels to finish.
// Without CUDA in the build or without a GPU every call is
// FAILED_PRECONDITION saying why.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_GPU_FP8_DEVICE_H_
#define KVTIER_GPU_FP8_DEVICE_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "encoding/fp8_codec.h"
#include "encoding/fp8_geometry.h"

namespace kvtier {

absl::StatusOr<Fp8Stats> EncodeFp8OnDevice(int device, const fp8::Geometry& geometry,
                                           const void* plain, void* encoded, size_t count);
absl::Status DecodeFp8OnDevice(int device, const fp8::Geometry& geometry, const void* encoded,
                               void* plain, size_t count);

}  // namespace kvtier

#endif  // KVTIER_GPU_FP8_DEVICE_H_
