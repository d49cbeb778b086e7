#include "storage/nvme/slot_header.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/checksum.h"

namespace kvtier {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'T', 'S', 'L', 'O', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksummedBytes = 128;

void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void PutKey(uint8_t* p, const BlockKey& key) {
  p[0] = static_cast<uint8_t>(key.size());
  std::memcpy(p + 1, key.bytes().data(), key.size());
}

}  // namespace

void EncodeSlotHeader(const SlotHeader& h, absl::Span<uint8_t> out) {
  uint8_t* p = out.data();
  std::memset(p, 0, kSlotHeaderBytes);
  std::memcpy(p, kMagic, sizeof(kMagic));
  PutU32(p + 8, kVersion);
  PutU32(p + 12, static_cast<uint32_t>(kSlotHeaderBytes));
  PutU64(p + 16, h.ns.high());
  PutU64(p + 24, h.ns.low());
  PutKey(p + 32, h.key);
  PutKey(p + 65, h.parent);
  PutU64(p + 104, h.payload_bytes);
  PutU64(p + 112, h.payload_checksum);
  PutU64(p + 120, h.sequence);
  PutU64(p + 128, Checksum64(absl::Span<const uint8_t>(p, kChecksummedBytes)));
}

absl::StatusOr<SlotHeader> DecodeSlotHeader(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < kChecksummedBytes + 8) {
    return absl::DataLossError(absl::StrCat("slot header truncated to ", bytes.size(), " bytes"));
  }
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("slot header magic mismatch");
  }
  if (Checksum64(bytes.subspan(0, kChecksummedBytes)) != GetU64(p + 128)) {
    return absl::DataLossError("slot header checksum mismatch");
  }
  if (GetU32(p + 8) != kVersion || GetU32(p + 12) != kSlotHeaderBytes) {
    return absl::DataLossError(absl::StrCat("slot header version ", GetU32(p + 8), " / size ",
                                            GetU32(p + 12), " not supported"));
  }
  SlotHeader h;
  h.ns = NamespaceId::FromParts(GetU64(p + 16), GetU64(p + 24));
  const uint8_t key_len = p[32], parent_len = p[65];
  if (key_len == 0 || key_len > BlockKey::kMaxBytes || parent_len > BlockKey::kMaxBytes) {
    return absl::DataLossError("slot header key lengths out of range");
  }
  h.key = *BlockKey::Create(absl::string_view(reinterpret_cast<const char*>(p + 33), key_len));
  if (parent_len > 0) {
    h.parent =
        *BlockKey::Create(absl::string_view(reinterpret_cast<const char*>(p + 66), parent_len));
  }
  h.payload_bytes = GetU64(p + 104);
  h.payload_checksum = GetU64(p + 112);
  h.sequence = GetU64(p + 120);
  return h;
}

}  // namespace kvtier
