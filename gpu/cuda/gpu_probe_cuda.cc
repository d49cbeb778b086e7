// ProbeGpus through the CUDA runtime (linked statically, so the binary starts
// without a CUDA installation; without a driver cudaGetDeviceCount fails and
// leaves the count untouched).
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpu/gpu_probe.h"

namespace kvtier {

GpuInventory ProbeGpus() {
  GpuInventory inv;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    inv.detail = absl::StrCat("no GPU (cudaGetDeviceCount: ", cudaGetErrorName(err), ": ",
                              cudaGetErrorString(err), ")");
    return inv;
  }
  if (count <= 0) {
    inv.detail = "no GPU (the CUDA driver reports 0 devices)";
    return inv;
  }
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    inv.devices.push_back(GpuDevice{i, prop.name, prop.totalGlobalMem});
    names.push_back(absl::StrCat(i, ": ", prop.name, " (", prop.totalGlobalMem >> 20, " MiB)"));
  }
  inv.detail = absl::StrCat(inv.devices.size(), " GPU(s): ", absl::StrJoin(names, ", "));
  return inv;
}

}  // namespace kvtier
