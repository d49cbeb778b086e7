#include "absl/strings/str_cat.h"
#include "gpu/cuda_ipc_region.h"

namespace kvtier {

absl::Status ValidateCudaIpcSpec(const CudaIpcSpec& spec) {
  if (spec.device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ipc.device ", spec.device, " is negative"));
  }
  if (spec.tensors.empty() || spec.tensors.size() > kMaxIpcTensors) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ipc needs 1..", kMaxIpcTensors, " tensors, not ", spec.tensors.size()));
  }
  uint64_t total = 0;
  for (size_t i = 0; i < spec.tensors.size(); ++i) {
    const CudaIpcTensorSpec& t = spec.tensors[i];
    if (t.handle.size() != kCudaIpcHandleBytes) {
      return absl::InvalidArgumentError(absl::StrCat("cuda_ipc.tensors[", i, "].handle has ",
                                                     t.handle.size(), " bytes, not ",
                                                     kCudaIpcHandleBytes));
    }
    if (t.size == 0 || t.offset > UINT64_MAX - t.size || total > UINT64_MAX - t.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda_ipc.tensors[", i, "]: size must be positive and offset + size fit"));
    }
    total += t.size;
  }
  return absl::OkStatus();
}

}  // namespace kvtier
