// BlockKey: the engine-supplied key of one block, 1..32 opaque bytes kept
// inline. A default-constructed BlockKey is empty and means "no key" (the
// parent of a root block); BlockKey::Create never returns an empty key.
//
// Invariant: the inline bytes past size() are zero, so two keys are equal
// exactly when their sizes and all kMaxBytes bytes are (a fixed-size compare
// the compiler keeps inline, on the lookup path of every block).
//
// Thread-safety: a value type, immutable after construction.
#ifndef KVTIER_STORAGE_BLOCK_KEY_H_
#define KVTIER_STORAGE_BLOCK_KEY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvtier {

class BlockKey {
 public:
  static constexpr size_t kMaxBytes = 32;

  // Returns INVALID_ARGUMENT unless 1 <= bytes.size() <= kMaxBytes.
  static absl::StatusOr<BlockKey> Create(absl::string_view bytes);
  // Parses lowercase or uppercase hex (2..64 hex digits).
  static absl::StatusOr<BlockKey> FromHex(absl::string_view hex);

  BlockKey() = default;

  absl::string_view bytes() const { return {data_.data(), size_}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string ToHex() const;

  friend bool operator==(const BlockKey& a, const BlockKey& b) {
    return a.size_ == b.size_ && std::memcmp(a.data_.data(), b.data_.data(), kMaxBytes) == 0;
  }
  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& k) {
    return H::combine(std::move(h), k.bytes());
  }

 private:
  std::array<char, kMaxBytes> data_{};
  uint8_t size_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_BLOCK_KEY_H_
