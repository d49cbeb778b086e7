// UringIoEngine: IoEngine over io_uring (liburing). One ring per engine,
// `queue_depth` entries; a batch is submitted in windows of up to the queue
// depth with files registered (IOSQE_FIXED_FILE) and, where the caller
// registered buffers, fixed-buffer reads and writes.
//
// Thread-safety: Run and Sync serialize on the ring.
#ifndef KVTIER_STORAGE_NVME_URING_URING_IO_ENGINE_H_
#define KVTIER_STORAGE_NVME_URING_URING_IO_ENGINE_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "storage/nvme/io_engine.h"

namespace kvtier {

// UNAVAILABLE when the build lacks io_uring or the kernel refuses a ring
// (e.g. disabled by sysctl or a seccomp policy).
absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringIoEngine(uint32_t queue_depth);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_URING_URING_IO_ENGINE_H_
