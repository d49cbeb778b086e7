#include "kvtier/chained_hash.h"

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"

namespace kvtier {
namespace {

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

// The test vectors of docs/api.md, cross-checked with `xxhsum -H2` (Debian's
// xxhash package) over the documented input bytes.
TEST(ChainedHashTest, DocumentedVectors) {
  const std::string k1 = ChainedBlockKey("", {1, 2, 3, 4});
  EXPECT_EQ(Hex(k1), "546b2b5ae3fb24df13cf922af9485de5");
  EXPECT_EQ(Hex(ChainedBlockKey(k1, {5, 6, 7, 8})), "648fdcc98eedbc102ab4d5a7789a009d");
  const std::vector<std::string> extra = {"img:abc"};
  EXPECT_EQ(Hex(ChainedBlockKey("", {1, 2, 3, 4}, extra)), "3e27306a2cff6ea506068a753ad45ae2");
  EXPECT_EQ(Hex(ChainedBlockKey("", {-1, 128000, 2147483647})), "67c424f06a5fead5c95b2a3a840b9d41");
}

TEST(ChainedHashTest, KeysChainOverFullBlocksOnly) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<std::string> keys = ChainedBlockKeys(tokens, 4);
  ASSERT_EQ(keys.size(), 2u);  // the 9th token is a partial block
  EXPECT_EQ(keys[0], ChainedBlockKey("", {1, 2, 3, 4}));
  EXPECT_EQ(keys[1], ChainedBlockKey(keys[0], {5, 6, 7, 8}));
  // A different first block changes every later key.
  const std::vector<int32_t> other = {0, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_NE(ChainedBlockKeys(other, 4)[1], keys[1]);
  EXPECT_TRUE(ChainedBlockKeys(tokens, 0).empty());
  EXPECT_TRUE(ChainedBlockKey(std::string(256, 'p'), {1}).empty());  // not a key
}

}  // namespace
}  // namespace kvtier
