#include "base/hashed_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/types/span.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define KVTIER_STREAMING_STORES 1
#else
#define KVTIER_STREAMING_STORES 0
#endif

namespace kvtier {
namespace {

// Below this a streaming copy is not worth its fence and alignment.
constexpr size_t kStreamMinBytes = 256;

// StreamCopy without the closing fence.
void StreamCopyUnfenced(uint8_t* dst, const uint8_t* src, size_t n) {
#if KVTIER_STREAMING_STORES
  if (n >= kStreamMinBytes) {
    // Align the destination to 16 bytes: the stores need it, loads do not.
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    std::memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
    }
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace

void StoreFence() {
#if KVTIER_STREAMING_STORES
  _mm_sfence();
#endif
}

void StreamCopy(void* dst, const void* src, size_t n) {
  StreamCopyUnfenced(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
  StoreFence();
}

void CopyAndHash(void* dst, const void* src, size_t n, Checksum64Stream& hash) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  alignas(64) uint8_t bounce[kHashedCopyPiece];
  for (size_t at = 0; at < n; at += kHashedCopyPiece) {
    const size_t len = std::min(kHashedCopyPiece, n - at);
    std::memcpy(bounce, s + at, len);
    hash.Update(absl::Span<const uint8_t>(bounce, len));
    StreamCopyUnfenced(d + at, bounce, len);
  }
  StoreFence();
}

void HashAndCopy(void* dst, const void* src, size_t n, Checksum64Stream& hash) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t at = 0; at < n; at += kHashedCopyPiece) {
    const size_t len = std::min(kHashedCopyPiece, n - at);
    hash.Update(absl::Span<const uint8_t>(s + at, len));
    StreamCopyUnfenced(d + at, s + at, len);
  }
  StoreFence();
}

}  // namespace kvtier
