// gpu/fp8_device.h for CUDA builds: checks the device, runs the kernels on
// the default stream and waits.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gpu/cuda/cuda_status.h"
#include "gpu/cuda/fp8_kernels.h"
#include "gpu/fp8_device.h"

namespace kvtier {
namespace {

absl::Status CheckDevice(int device) {
  int count = 0;
  if (absl::Status s = CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("fp8 on the GPU: no GPU (", s.message(), ")"));
  }
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("fp8 on the GPU: GPU ", device, " does not exist (", count, " found)"));
  }
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice");
}

}  // namespace

absl::StatusOr<Fp8Stats> EncodeFp8OnDevice(int device, const fp8::Geometry& g, const void* plain,
                                           void* encoded, size_t count) {
  RETURN_IF_ERROR(CheckDevice(device));
  Fp8Stats stats;
  if (count == 0) return stats;
  unsigned long long* clipped = nullptr;
  if (absl::Status s =
          CudaStatus(cudaMalloc(reinterpret_cast<void**>(&clipped), sizeof *clipped), "cudaMalloc");
      !s.ok()) {
    return s;
  }
  absl::Status s = CudaStatus(cudaMemset(clipped, 0, sizeof *clipped), "cudaMemset");
  if (s.ok())
    s = CudaStatus(LaunchFp8Encode(g, plain, encoded, count, clipped, nullptr),
                   "fp8 encode launch");
  if (s.ok()) s = CudaStatus(cudaDeviceSynchronize(), "fp8 encode");
  unsigned long long host_clipped = 0;
  if (s.ok()) {
    s = CudaStatus(cudaMemcpy(&host_clipped, clipped, sizeof host_clipped, cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
  }
  cudaFree(clipped);
  if (!s.ok()) return s;
  stats.clipped = host_clipped;
  stats.values = uint64_t(count) * g.layers * g.layer_codes();
  return stats;
}

absl::Status DecodeFp8OnDevice(int device, const fp8::Geometry& g, const void* encoded, void* plain,
                               size_t count) {
  RETURN_IF_ERROR(CheckDevice(device));
  if (count == 0) return absl::OkStatus();
  if (g.valid < g.tokens) {
    // Tokens past the valid ones decode to zero.
    if (absl::Status s =
            CudaStatus(cudaMemset(plain, 0, g.block_elements * g.elem_bytes * count), "cudaMemset");
        !s.ok()) {
      return s;
    }
  }
  absl::Status s =
      CudaStatus(LaunchFp8Decode(g, encoded, plain, count, nullptr), "fp8 decode launch");
  if (s.ok()) s = CudaStatus(cudaDeviceSynchronize(), "fp8 decode");
  return s;
}

}  // namespace kvtier
