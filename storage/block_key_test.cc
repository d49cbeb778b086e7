#include "storage/block_key.h"

#include <gtest/gtest.h>

#include <string>

namespace kvtier {
namespace {

TEST(BlockKeyTest, AcceptsOneToThirtyTwoBytes) {
  EXPECT_TRUE(BlockKey::Create(std::string(1, 'a')).ok());
  absl::StatusOr<BlockKey> k = BlockKey::Create(std::string(32, '\xff'));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->size(), 32u);
  EXPECT_EQ(k->bytes(), std::string(32, '\xff'));
}

TEST(BlockKeyTest, RejectsEmptyAndLongKeys) {
  EXPECT_EQ(BlockKey::Create("").status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = BlockKey::Create(std::string(33, 'x')).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("33 bytes"), std::string::npos) << s;
}

TEST(BlockKeyTest, HexRoundTripAndErrors) {
  absl::StatusOr<BlockKey> k = BlockKey::FromHex("00ff10Ab");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->bytes(), std::string("\x00\xff\x10\xab", 4));
  EXPECT_EQ(k->ToHex(), "00ff10ab");
  EXPECT_FALSE(BlockKey::FromHex("abc").ok());
  EXPECT_FALSE(BlockKey::FromHex("zz").ok());
  EXPECT_FALSE(BlockKey::FromHex("").ok());
}

TEST(BlockKeyTest, EqualityIsByBytes) {
  EXPECT_EQ(*BlockKey::Create("ab"), *BlockKey::Create("ab"));
  EXPECT_FALSE(*BlockKey::Create("ab") == *BlockKey::Create("abc"));
  EXPECT_TRUE(BlockKey().empty());
}

// The fixed-size compare must still tell apart keys that differ only in
// length or in zero bytes, and match keys built from different buffers.
TEST(BlockKeyTest, EqualityIsByLengthAndEveryByte) {
  auto key = [](const char* bytes, size_t n) { return *BlockKey::Create(std::string(bytes, n)); };
  EXPECT_FALSE(key("ab\0", 3) == key("ab", 2));
  EXPECT_FALSE(key("\0", 1) == key("\0\0", 2));
  EXPECT_EQ(key("ab\0c", 4), *BlockKey::Create(std::string("xab\0cy", 6).substr(1, 4)));
  EXPECT_FALSE(*BlockKey::Create(std::string(32, 'x')) ==
               *BlockKey::Create(std::string(31, 'x') + "y"));
  EXPECT_EQ(*BlockKey::FromHex("00ff"), key("\0\xff", 2));
  BlockKey copy = *BlockKey::Create(std::string(32, 'q'));
  copy = *BlockKey::Create("q");
  EXPECT_EQ(copy, *BlockKey::Create("q"));
  EXPECT_FALSE(BlockKey() == key("\0", 1));
}

}  // namespace
}  // namespace kvtier
