// How `kvtier put FILE` turns a file into blocks: fixed-size pieces (the last
// may be shorter), each keyed by XXH3-128 over its parent's key and its
// bytes, so a file's blocks form one chain and equal files get equal keys.
// This is a smoke-test scheme for files, not the canonical token hash that
// the client libraries offer engines.
//
// Thread-safety: pure functions.
#ifndef KVTIER_CLIENT_CLI_FILE_BLOCKS_H_
#define KVTIER_CLIENT_CLI_FILE_BLOCKS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier {

struct FileBlock {
  std::string key;         // 16 bytes
  std::string parent_key;  // empty for the first block
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Splits `contents` into blocks of `block_bytes` (> 0).
std::vector<FileBlock> SplitIntoBlocks(const std::string& contents, uint64_t block_bytes);

// The namespace layout `kvtier put` uses for a given block size: 1 layer,
// 1 KV head, head_dim 128, bf16, and block_bytes / 512 tokens per block.
// block_bytes must be a positive multiple of 512.
inline constexpr uint64_t kFileBlockGranule = 512;

}  // namespace kvtier

#endif  // KVTIER_CLIENT_CLI_FILE_BLOCKS_H_
