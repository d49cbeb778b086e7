#include "base/checksum.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier {
namespace {

TEST(ChecksumTest, StreamMatchesOneShot) {
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  Checksum64Stream stream;
  absl::Span<const uint8_t> all(data);
  stream.Update(all.subspan(0, 1));
  stream.Update(all.subspan(1, 4095));
  stream.Update(all.subspan(4096));
  EXPECT_EQ(stream.Digest(), Checksum64(all));
  stream.Reset();
  stream.Update(all.subspan(0, 10));
  EXPECT_EQ(stream.Digest(), Checksum64(all.subspan(0, 10)));
}

TEST(ChecksumTest, DetectsASingleFlippedBit) {
  std::vector<uint8_t> data(4096, 0x5a);
  const uint64_t before = Checksum64(data);
  data[1234] ^= 0x10;
  EXPECT_NE(Checksum64(data), before);
}

}  // namespace
}  // namespace kvtier
