#include "server/region_registration.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "datapath/shared_memory_region.h"

namespace kvtier {

std::string RegionRegistration::AllowedShmDir(const std::string& tenant) const {
  return options_.per_tenant_dirs ? absl::StrCat(options_.shm_dir, "/", tenant) : options_.shm_dir;
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> RegionRegistration::Open(
    const RegionRequest& request) const {
  if (request.owner_pid > static_cast<uint32_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("owner_pid is not a process id");
  }
  switch (request.kind) {
    case RegionRequest::Kind::kSharedMemory:
      return OpenSharedMemory(request);
    case RegionRequest::Kind::kCudaIpc:
      return OpenCudaIpc(request);
    case RegionRequest::Kind::kNone:
      break;
  }
  return absl::InvalidArgumentError("region must name a kind (shared_memory or cuda_ipc)");
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> RegionRegistration::OpenSharedMemory(
    const RegionRequest& request) const {
  // With per-tenant directories a tenant cannot name another tenant's buffers.
  ASSIGN_OR_RETURN(std::unique_ptr<SharedMemoryRegion> shm,
                   SharedMemoryRegion::Open(request.shm_path, request.shm_size_bytes,
                                            AllowedShmDir(request.tenant)));
  // The owner must be the engine that maps the file: a pid from another
  // pid namespace would name some unrelated process.
  if (request.owner_pid != 0 && !shm->IsMappedBy(static_cast<int>(request.owner_pid))) {
    return absl::InvalidArgumentError(
        absl::StrCat("owner_pid ", request.owner_pid, " does not map ", request.shm_path,
                     "; give the engine's pid as the daemon sees it, or 0"));
  }
  return std::unique_ptr<MemoryRegion>(std::move(shm));
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> RegionRegistration::OpenCudaIpc(
    const RegionRequest& request) const {
  const CudaIpcSpec& spec = request.cuda_ipc;
  RETURN_IF_ERROR(ValidateCudaIpcSpec(spec));
  // Only memory the copy engine can reach is worth importing.
  const CopyEngineCapabilities caps = options_.copy_engine != nullptr
                                          ? options_.copy_engine->Capabilities()
                                          : CopyEngineCapabilities{};
  if (!caps.device_memory) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU memory cannot be registered: the copy engine is ",
                     caps.name.empty() ? "missing" : caps.name, " (", caps.detail, ")"));
  }
  if (spec.device != caps.device) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_ipc.device ", spec.device,
                                                   ": this daemon copies on GPU ", caps.device,
                                                   " (gpu.device)"));
  }
  if (!options_.open_cuda_ipc) {
    return absl::FailedPreconditionError("CUDA IPC memory is not supported here");
  }
  return options_.open_cuda_ipc(spec);
}

}  // namespace kvtier
