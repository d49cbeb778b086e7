// fp8 on the GPU, for builds without CUDA.
#include "gpu/fp8_device.h"

namespace kvtier {

absl::StatusOr<Fp8Stats> EncodeFp8OnDevice(int, const fp8::Geometry&, const void*, void*, size_t) {
  return absl::FailedPreconditionError("fp8 on the GPU: this build has no CUDA");
}

absl::Status DecodeFp8OnDevice(int, const fp8::Geometry&, const void*, void*, size_t) {
  return absl::FailedPreconditionError("fp8 on the GPU: this build has no CUDA");
}

}  // namespace kvtier
