// CudaStatus: a CUDA runtime error as an absl::Status naming the call.
//
// Thread-safety: pure function.
#ifndef KVTIER_GPU_CUDA_CUDA_STATUS_H_
#define KVTIER_GPU_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kvtier {

inline absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg =
      absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  switch (err) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return absl::InvalidArgumentError(msg);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace kvtier

#endif  // KVTIER_GPU_CUDA_CUDA_STATUS_H_
