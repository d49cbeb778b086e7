// SlotHeader: the first 4 KiB of every NVMe slot, so that a slot describes
// itself: which namespace and key it holds, its parent, the payload's size
// and XXH3-64 checksum, and the write's sequence number. The header carries
// its own checksum; a torn or foreign header never decodes.
//
// On-disk layout (little-endian), then zeros to 4096 bytes:
//   0  magic "KVTSLOT1"      8  version (u32) = 1     12 header bytes (u32)
//   16 namespace high (u64)  24 namespace low (u64)
//   32 key length (u8)       33 key (32 bytes)
//   65 parent length (u8)    66 parent key (32 bytes) 98 zero (6 bytes)
//   104 payload size (u64)   112 payload checksum (u64)
//   120 sequence (u64)       128 header checksum: XXH3-64 of bytes [0, 128)
//
// Thread-safety: value type and pure functions.
#ifndef KVTIER_STORAGE_NVME_SLOT_HEADER_H_
#define KVTIER_STORAGE_NVME_SLOT_HEADER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"

namespace kvtier {

inline constexpr uint64_t kSlotHeaderBytes = 4096;

struct SlotHeader {
  NamespaceId ns;
  BlockKey key;
  BlockKey parent;
  uint64_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
  uint64_t sequence = 0;
};

// Writes `header` into out[0, kSlotHeaderBytes). `out` must be that large.
void EncodeSlotHeader(const SlotHeader& header, absl::Span<uint8_t> out);

// DATA_LOSS if `bytes` is shorter than a header, or its magic, version,
// lengths or checksum disagree (a torn, stale or foreign slot).
absl::StatusOr<SlotHeader> DecodeSlotHeader(absl::Span<const uint8_t> bytes);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_SLOT_HEADER_H_
