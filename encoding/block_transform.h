// BlockTransform: a namespace's storage encoding. Engines hand the daemon
// "plain" blocks (their KV bytes in the block format) and get plain blocks
// back; the tiers hold the "stored" form. Encode runs when a block enters
// the daemon (Put, Save) and Decode when it leaves (Get, Load); checksums
// cover the stored form, so verification and recovery are unchanged.
// Lossy encodings (fp8) change what an engine reads back, so the encoding
// is part of the namespace's identity (NamespaceSpec::encoding).
//
// The interface is storage's; the fp8 implementation lives in gpu/.
//
// Thread-safety: implementations must allow concurrent Encode and Decode.
#ifndef KVTIER_ENCODING_BLOCK_TRANSFORM_H_
#define KVTIER_ENCODING_BLOCK_TRANSFORM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace kvtier {

class BlockTransform {
 public:
  struct Stats {
    uint64_t blocks_encoded = 0;
    uint64_t values = 0;   // values encoded
    uint64_t clipped = 0;  // of those, saturated or not finite
  };

  virtual ~BlockTransform() = default;
  // e.g. "fp8-e4m3 (vllm-nhd, K scales per 16 tokens)".
  virtual std::string Describe() const = 0;
  // The size of every plain block (encodings work on whole blocks) and of
  // its stored form.
  virtual uint64_t plain_bytes() const = 0;
  virtual uint64_t stored_bytes() const = 0;
  // `plain` has plain_bytes(), `stored` stored_bytes().
  virtual absl::Status Encode(absl::Span<const uint8_t> plain, absl::Span<uint8_t> stored) = 0;
  // DATA_LOSS when `stored` is not a block of this encoding.
  virtual absl::Status Decode(absl::Span<const uint8_t> stored, absl::Span<uint8_t> plain) = 0;
  virtual Stats stats() const = 0;
};

}  // namespace kvtier

#endif  // KVTIER_ENCODING_BLOCK_TRANSFORM_H_
