// CreateUringIoEngine for builds without liburing (KVTIER_WITH_URING=OFF or
// not found).
#include "absl/status/status.h"
#include "storage/nvme/uring/uring_io_engine.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<IoEngine>> CreateUringIoEngine(uint32_t) {
  return absl::UnavailableError("this build has no io_uring support (KVTIER_WITH_URING)");
}

}  // namespace kvtier
