#include "client/cli/file_blocks.h"

#include <gtest/gtest.h>

namespace kvtier {
namespace {

TEST(FileBlocksTest, SplitsIntoAChainCoveringEveryByte) {
  std::string data(2500, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  std::vector<FileBlock> blocks = SplitIntoBlocks(data, 1024);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].parent_key, "");
  EXPECT_EQ(blocks[1].parent_key, blocks[0].key);
  EXPECT_EQ(blocks[2].parent_key, blocks[1].key);
  EXPECT_EQ(blocks[2].offset, 2048u);
  EXPECT_EQ(blocks[2].size, 452u);
  for (const FileBlock& b : blocks) EXPECT_EQ(b.key.size(), 16u);
  EXPECT_NE(blocks[0].key, blocks[1].key);
}

TEST(FileBlocksTest, KeysDependOnContentAndPrefix) {
  std::string a(1024, 'a'), b(1024, 'a');
  b[1000] = 'b';
  EXPECT_EQ(SplitIntoBlocks(a, 512)[0].key, SplitIntoBlocks(b, 512)[0].key);
  EXPECT_NE(SplitIntoBlocks(a, 512)[1].key, SplitIntoBlocks(b, 512)[1].key);
  // Same bytes under a different parent get a different key.
  std::string c = std::string(512, 'z') + std::string(512, 'a');
  EXPECT_NE(SplitIntoBlocks(a, 512)[1].key, SplitIntoBlocks(c, 512)[1].key);
  EXPECT_TRUE(SplitIntoBlocks("", 512).empty());
}

}  // namespace
}  // namespace kvtier
