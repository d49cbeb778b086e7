// The canonical chained block key, for engines that have no hash scheme of
// their own: a block's key is XXH3-128 over its parent's key, its token ids
// and any extra keys (e.g. image hashes, LoRA ids), so equal keys mean equal
// prefixes. Byte layout of the hashed input (docs/api.md has test vectors):
//   u8  len(parent) | parent bytes (0 or 16)
//   u32 number of tokens | each token id as i32   (little-endian)
//   u32 number of extra keys | each: u32 length | bytes
// The key is the 16-byte canonical (big-endian) form of the hash.
//
// Thread-safety: pure functions.
#ifndef KVTIER_INCLUDE_KVTIER_CHAINED_HASH_H_
#define KVTIER_INCLUDE_KVTIER_CHAINED_HASH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvtier {

// The key of one block. `parent_key` is empty for the first block; one
// longer than 255 bytes is not a key and gives an empty (invalid) key.
std::string ChainedBlockKey(absl::string_view parent_key, absl::Span<const int32_t> tokens,
                            absl::Span<const std::string> extra_keys = {});

// Keys of every full block of `tokens` (a partial last block has none).
std::vector<std::string> ChainedBlockKeys(absl::Span<const int32_t> tokens, uint32_t block_tokens);

}  // namespace kvtier

#endif  // KVTIER_INCLUDE_KVTIER_CHAINED_HASH_H_
