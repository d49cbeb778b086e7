// ProbeGpus: which CUDA devices this process can use. The daemon calls it
// once at start to decide whether to create a GPU tier and reports the result
// in `kvtier status`. Built without CUDA, or run where no driver or GPU
// exists, it reports zero devices and why; it never fails or aborts.
//
// Thread-safety: safe to call from any thread.
#ifndef KVTIER_GPU_GPU_PROBE_H_
#define KVTIER_GPU_GPU_PROBE_H_

#include <string>
#include <vector>

namespace kvtier {

struct GpuDevice {
  int index = 0;
  std::string name;
  unsigned long long memory_bytes = 0;
};

struct GpuInventory {
  std::vector<GpuDevice> devices;
  // "no GPU (...)" with the reason, or a one-line summary of the devices.
  std::string detail;
};

GpuInventory ProbeGpus();

}  // namespace kvtier

#endif  // KVTIER_GPU_GPU_PROBE_H_
