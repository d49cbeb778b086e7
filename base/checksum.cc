// XXH3 through libxxhash's runtime dispatch (the _dispatch entry points):
// the widest vector unit the CPU has (AVX-512, AVX2, else SSE2), the same
// hash values whichever runs. The plain entry points are built for SSE2.
#include "base/checksum.h"

#include <xxh_x86dispatch.h>
#include <xxhash.h>

#include <new>

namespace kvtier {

uint64_t Checksum64(absl::Span<const uint8_t> bytes) {
  return XXH3_64bits_dispatch(bytes.data(), bytes.size());
}

Checksum64Stream::Checksum64Stream() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  Reset();
}

Checksum64Stream::~Checksum64Stream() { XXH3_freeState(state_); }

void Checksum64Stream::Reset() { XXH3_64bits_reset(state_); }

void Checksum64Stream::Update(absl::Span<const uint8_t> bytes) {
  XXH3_64bits_update_dispatch(state_, bytes.data(), bytes.size());
}

uint64_t Checksum64Stream::Digest() const { return XXH3_64bits_digest(state_); }

Hash128 Fingerprint128(absl::string_view bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return Hash128{h.high64, h.low64};
}

}  // namespace kvtier
