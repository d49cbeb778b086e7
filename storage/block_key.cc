#include "storage/block_key.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kvtier {

absl::StatusOr<BlockKey> BlockKey::Create(absl::string_view bytes) {
  if (bytes.empty() || bytes.size() > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("block key is ", bytes.size(), " bytes; keys are 1..", kMaxBytes, " bytes"));
  }
  BlockKey key;
  std::memcpy(key.data_.data(), bytes.data(), bytes.size());
  key.size_ = static_cast<uint8_t>(bytes.size());
  return key;
}

absl::StatusOr<BlockKey> BlockKey::FromHex(absl::string_view hex) {
  if (hex.size() % 2 != 0 ||
      hex.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", hex.substr(0, 80), "' is not a hex block key"));
  }
  return Create(absl::HexStringToBytes(hex));
}

std::string BlockKey::ToHex() const { return absl::BytesToHexString(bytes()); }

}  // namespace kvtier
