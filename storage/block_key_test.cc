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

}  // namespace
}  // namespace kvtier
