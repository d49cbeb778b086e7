// Short probes that seed the tiers' TransferMeters when the daemon starts:
// a memory copy for the host tier, and an O_DIRECT write-then-read of a
// scratch file for an NVMe directory (so the read really reaches the
// device, not the page cache or an unwritten extent).
//
// Thread-safety: stateless functions; each call uses its own buffers/files.
#ifndef KVTIER_STORAGE_TIER_PROBE_H_
#define KVTIER_STORAGE_TIER_PROBE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "storage/transfer_meter.h"

namespace kvtier {

// Copies `bytes` (rounded up to 4 KiB) a few times; latency from a 4 KiB copy.
TransferEstimate ProbeMemoryCopy(size_t bytes);

// Writes `bytes` (multiple of 1 MiB) to <dir>/kvtier-probe.tmp with
// O_DIRECT, syncs, reads it back in 1 MiB O_DIRECT reads, and removes it.
// Latency from one 4 KiB O_DIRECT read. UNAVAILABLE (with errno text) when
// the directory does not allow it.
absl::StatusOr<TransferEstimate> ProbeDirectRead(const std::string& dir, size_t bytes);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_TIER_PROBE_H_
