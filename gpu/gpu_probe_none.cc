// ProbeGpus for builds without CUDA (KVTIER_WITH_CUDA=OFF or not found).
#include "gpu/gpu_probe.h"

namespace kvtier {

GpuInventory ProbeGpus() { return GpuInventory{{}, "no GPU (built without CUDA)"}; }

}  // namespace kvtier
