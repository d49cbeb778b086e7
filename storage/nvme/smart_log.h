// SMART / Health Information of the NVMe drive behind a data directory (NVMe
// admin Get Log Page, log 0x02): data units written and percentage used, to
// report beside the daemon's own count of bytes written. Where the directory
// is not on an NVMe device (virtio, SATA, tmpfs...) or the log cannot be read
// (permissions), `available` is false and `detail` says why.
//
// Thread-safety: pure functions (ReadSmartHealth does blocking I/O).
#ifndef KVTIER_STORAGE_NVME_SMART_LOG_H_
#define KVTIER_STORAGE_NVME_SMART_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kvtier {

struct SmartHealth {
  bool available = false;
  std::string detail;                     // device name, or why SMART is unavailable
  uint64_t data_units_written_bytes = 0;  // NVMe data units x 512,000 bytes
  uint32_t percentage_used = 0;           // vendor estimate of life used (may exceed 100)
};

// Parses a 512-byte SMART / Health Information log page.
// INVALID_ARGUMENT if the page is shorter.
absl::StatusOr<SmartHealth> ParseSmartLog(absl::Span<const uint8_t> page);

SmartHealth ReadSmartHealth(const std::string& dir);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_SMART_LOG_H_
