#include "base/hashed_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"
#include "base/checksum.h"

namespace kvtier {
namespace {

// Sizes around the streaming threshold, the 64-byte store step and the
// hashed piece, at every alignment mix of source and destination.
constexpr size_t kSizes[] = {0,    1,     15,    63,    64,    255,   256,   257,
                             4095, 16383, 16384, 16385, 65536, 65600, 100007};
constexpr size_t kOffsets[] = {0, 1, 8, 15};
constexpr size_t kGuard = 64;  // canary bytes either side of the destination

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  uint32_t x = 0x9e3779b9u;
  for (uint8_t& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

enum class Kind { kStream, kCopyAndHash, kHashAndCopy };

void CheckCopy(Kind kind) {
  const std::vector<uint8_t> source = Pattern(100007 + 64);
  for (size_t n : kSizes) {
    for (size_t src_off : kOffsets) {
      for (size_t dst_off : kOffsets) {
        const uint8_t* src = source.data() + src_off;
        std::vector<uint8_t> dst(n + dst_off + 2 * kGuard, 0xA5);
        uint8_t* to = dst.data() + kGuard + dst_off;
        Checksum64Stream hash;
        switch (kind) {
          case Kind::kStream:
            StreamCopy(to, src, n);
            break;
          case Kind::kCopyAndHash:
            CopyAndHash(to, src, n, hash);
            break;
          case Kind::kHashAndCopy:
            HashAndCopy(to, src, n, hash);
            break;
        }
        SCOPED_TRACE(testing::Message() << "n " << n << " src+" << src_off << " dst+" << dst_off);
        ASSERT_EQ(std::memcmp(to, src, n), 0);
        for (size_t i = 0; i < kGuard + dst_off; ++i) ASSERT_EQ(dst[i], 0xA5) << "before, " << i;
        for (size_t i = kGuard + dst_off + n; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], 0xA5) << "after, " << i;
        }
        if (kind != Kind::kStream) {
          ASSERT_EQ(hash.Digest(), Checksum64({src, n}));
        }
      }
    }
  }
}

TEST(HashedCopyTest, StreamCopyCopiesExactlyTheRange) { CheckCopy(Kind::kStream); }
TEST(HashedCopyTest, CopyAndHashCopiesAndHashesExactlyTheRange) { CheckCopy(Kind::kCopyAndHash); }
TEST(HashedCopyTest, HashAndCopyCopiesAndHashesExactlyTheRange) { CheckCopy(Kind::kHashAndCopy); }

// A block copied in several calls hashes as the block does in one.
TEST(HashedCopyTest, PiecesOfABlockHashAsTheWholeBlock) {
  const std::vector<uint8_t> block = Pattern(3 * 65536 + 123);
  std::vector<uint8_t> a(block.size()), b(block.size());
  Checksum64Stream ha, hb;
  for (size_t at = 0; at < block.size(); at += 65536) {
    const size_t n = std::min<size_t>(65536, block.size() - at);
    CopyAndHash(a.data() + at, block.data() + at, n, ha);
    HashAndCopy(b.data() + at, block.data() + at, n, hb);
  }
  EXPECT_EQ(a, block);
  EXPECT_EQ(b, block);
  EXPECT_EQ(ha.Digest(), Checksum64(block));
  EXPECT_EQ(hb.Digest(), Checksum64(block));
}

}  // namespace
}  // namespace kvtier
