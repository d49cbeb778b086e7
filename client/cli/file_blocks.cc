#include "client/cli/file_blocks.h"

#include <xxhash.h>

#include <algorithm>

namespace kvtier {

std::vector<FileBlock> SplitIntoBlocks(const std::string& contents, uint64_t block_bytes) {
  std::vector<FileBlock> out;
  std::string parent;
  for (uint64_t off = 0; off < contents.size(); off += block_bytes) {
    FileBlock b;
    b.offset = off;
    b.size = std::min<uint64_t>(block_bytes, contents.size() - off);
    b.parent_key = parent;
    std::string input = parent;
    input.append(contents, off, b.size);
    const XXH128_hash_t h = XXH3_128bits(input.data(), input.size());
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, h);
    b.key.assign(reinterpret_cast<const char*>(canon.digest), sizeof(canon.digest));
    parent = b.key;
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace kvtier
