// Checksums and fingerprints used by the storage engine (xxHash XXH3).
// Thread-safety: pure functions.
#ifndef KVTIER_BASE_CHECKSUM_H_
#define KVTIER_BASE_CHECKSUM_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

struct XXH3_state_s;  // xxhash.h

namespace kvtier {

// XXH3-64 of `bytes`: the per-block checksum stored at Put, verified on read.
uint64_t Checksum64(absl::Span<const uint8_t> bytes);

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;
};
// Incremental Checksum64: Update with consecutive pieces, then Digest gives
// the same value as Checksum64 over their concatenation. Not thread-safe.
class Checksum64Stream {
 public:
  Checksum64Stream();
  ~Checksum64Stream();
  Checksum64Stream(const Checksum64Stream&) = delete;
  Checksum64Stream& operator=(const Checksum64Stream&) = delete;

  void Reset();
  void Update(absl::Span<const uint8_t> bytes);
  uint64_t Digest() const;

 private:
  ::XXH3_state_s* state_;
};

// XXH3-128 of `bytes`.
Hash128 Fingerprint128(absl::string_view bytes);

}  // namespace kvtier

#endif  // KVTIER_BASE_CHECKSUM_H_
