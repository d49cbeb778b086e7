// RegionRegistration: the policy of RegisterMemory, which memory a tenant's
// engine may register and how it is opened. Shared memory must be a file
// under the daemon's shm_dir (with authentication, under shm_dir/TENANT, a
// directory the operator mounts into that tenant's engines only), mapped by
// the owner the request names; CUDA IPC memory must be valid, on the GPU the
// copy engine copies on, and only where the copy engine reaches device
// memory.
//
// This class knows nothing of gRPC: KvCacheService::RegisterMemory hands it
// a RegionRequest and adds what it opens to the RegionTable.
//
// Thread-safety: thread-safe (immutable; the copy engine and opener are).
#ifndef KVTIER_SERVER_REGION_REGISTRATION_H_
#define KVTIER_SERVER_REGION_REGISTRATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "datapath/copy_engine.h"
#include "datapath/memory_region.h"
#include "gpu/cuda_ipc_region.h"

namespace kvtier {

using CudaIpcOpener =
    std::function<absl::StatusOr<std::unique_ptr<MemoryRegion>>(const CudaIpcSpec& spec)>;

// What a RegisterMemory call asks for, of a caller of `tenant`.
struct RegionRequest {
  enum class Kind { kNone, kSharedMemory, kCudaIpc };
  std::string tenant;
  uint32_t owner_pid = 0;  // 0: none
  Kind kind = Kind::kNone;
  // kSharedMemory:
  std::string shm_path;
  uint64_t shm_size_bytes = 0;
  // kCudaIpc:
  CudaIpcSpec cuda_ipc;
};

class RegionRegistration {
 public:
  struct Options {
    // Where shared-memory files may live.
    std::string shm_dir;
    // Each tenant's files live in shm_dir/TENANT (authentication on).
    bool per_tenant_dirs = false;
    // Moves the bytes of GPU regions (nullptr: none); must outlive this.
    CopyEngine* copy_engine = nullptr;
    // Imports CUDA IPC memory (empty: not supported here).
    CudaIpcOpener open_cuda_ipc;
  };

  explicit RegionRegistration(Options options) : options_(std::move(options)) {}

  // The region `request` names, opened. INVALID_ARGUMENT for an owner_pid
  // that is no process id, a request of no kind, a shared-memory file its
  // owner does not map, a bad CUDA IPC spec or one on another GPU;
  // FAILED_PRECONDITION where GPU memory cannot be registered; the refusals
  // of SharedMemoryRegion::Open (e.g. PERMISSION_DENIED outside the allowed
  // directory) and of the CUDA IPC opener.
  absl::StatusOr<std::unique_ptr<MemoryRegion>> Open(const RegionRequest& request) const;

  // The directory `tenant`'s shared-memory files must live in.
  std::string AllowedShmDir(const std::string& tenant) const;

 private:
  absl::StatusOr<std::unique_ptr<MemoryRegion>> OpenSharedMemory(
      const RegionRequest& request) const;
  absl::StatusOr<std::unique_ptr<MemoryRegion>> OpenCudaIpc(const RegionRequest& request) const;

  const Options options_;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_REGION_REGISTRATION_H_
