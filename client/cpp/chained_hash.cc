#include "kvtier/chained_hash.h"

#include <xxhash.h>

#include <cstring>

namespace kvtier {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::string ChainedBlockKey(absl::string_view parent_key, absl::Span<const int32_t> tokens,
                            absl::Span<const std::string> extra_keys) {
  if (parent_key.size() > 255) return std::string();
  std::string in;
  in.reserve(1 + parent_key.size() + 8 + 4 * tokens.size());
  in.push_back(static_cast<char>(static_cast<uint8_t>(parent_key.size())));
  in.append(parent_key.data(), parent_key.size());
  PutU32(in, static_cast<uint32_t>(tokens.size()));
  for (int32_t t : tokens) PutU32(in, static_cast<uint32_t>(t));
  PutU32(in, static_cast<uint32_t>(extra_keys.size()));
  for (const std::string& e : extra_keys) {
    PutU32(in, static_cast<uint32_t>(e.size()));
    in.append(e);
  }
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits(in.data(), in.size()));
  return std::string(reinterpret_cast<const char*>(canon.digest), sizeof(canon.digest));
}

std::vector<std::string> ChainedBlockKeys(absl::Span<const int32_t> tokens, uint32_t block_tokens) {
  std::vector<std::string> keys;
  if (block_tokens == 0) return keys;
  std::string parent;
  for (size_t start = 0; start + block_tokens <= tokens.size(); start += block_tokens) {
    parent = ChainedBlockKey(parent, tokens.subspan(start, block_tokens));
    keys.push_back(parent);
  }
  return keys;
}

}  // namespace kvtier
