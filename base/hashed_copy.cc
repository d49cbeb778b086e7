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

// Copies n bytes from src to dst (and with kTwin the same bytes to `twin`,
// which may be unaligned), without the closing fence. With kTwin every
// source byte is read once and both copies are stored from the same value,
// so dst and twin agree even if src changes meanwhile.
template <bool kTwin>
void CopyUnfenced(uint8_t* dst, uint8_t* twin, const uint8_t* src, size_t n) {
  // A piece stored by memcpy: with kTwin, into twin first and from there to
  // dst, so that src is read once.
  auto plain = [&](size_t len) {
    if constexpr (kTwin) {
      std::memcpy(twin, src, len);
      // Without it the compiler may copy dst from src instead (a copy of a
      // copy is one of the source to it, unless src may have changed).
      asm volatile("" ::: "memory");
      std::memcpy(dst, twin, len);
      twin += len;
    } else {
      std::memcpy(dst, src, len);
    }
    dst += len;
    src += len;
    n -= len;
  };
#if KVTIER_STREAMING_STORES
  if (n >= kStreamMinBytes) {
    // Align the destination to 16 bytes: the stores need it, loads do not.
    plain((16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
      __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
      if constexpr (kTwin) {
        // The values are pinned to registers here, so the compiler cannot
        // read src again for the second store.
        asm volatile("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(twin), a);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(twin + 16), b);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(twin + 32), c);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(twin + 48), d);
        twin += 64;
      }
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
    }
  }
#endif
  plain(n);
}

}  // namespace

void StoreFence() {
#if KVTIER_STREAMING_STORES
  _mm_sfence();
#endif
}

void StreamCopy(void* dst, const void* src, size_t n) {
  CopyUnfenced<false>(static_cast<uint8_t*>(dst), nullptr, static_cast<const uint8_t*>(src), n);
  StoreFence();
}

void CopyAndHash(void* dst, const void* src, size_t n, Checksum64Stream& hash) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  alignas(64) uint8_t bounce[kHashedCopyPiece];
  for (size_t at = 0; at < n; at += kHashedCopyPiece) {
    const size_t len = std::min(kHashedCopyPiece, n - at);
    CopyUnfenced<true>(d + at, bounce, s + at, len);
    hash.Update(absl::Span<const uint8_t>(bounce, len));
  }
  StoreFence();
}

}  // namespace kvtier
