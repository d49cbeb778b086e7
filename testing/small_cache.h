// Test-only: a small BlockCache (4 MiB host tier in 1 MiB slabs, host
// only) and namespaces of one layer, one head of 128, bf16: 512 bytes per
// token, so a block of `tokens` tokens is 512 * tokens bytes.
#ifndef KVTIER_TESTING_SMALL_CACHE_H_
#define KVTIER_TESTING_SMALL_CACHE_H_

#include <memory>
#include <string>

#include "base/clock.h"
#include "storage/block_cache.h"

namespace kvtier {

inline std::unique_ptr<BlockCache> SmallCache(Clock* clock) {
  BlockCacheOptions o;
  o.host_bytes = uint64_t{4} << 20;
  o.slab_bytes = uint64_t{1} << 20;
  o.max_block_bytes = uint64_t{1} << 20;
  return *BlockCache::Create(o, clock);
}

inline NamespaceId OpenSmallNamespace(BlockCache& cache, const std::string& model,
                                      uint32_t tokens) {
  NamespaceSpec s;
  s.model_id = model;
  s.layout = KvLayout{1, 1, 128, DType::kBf16, tokens, 0, 1};
  return cache.OpenNamespace(s)->id;
}

}  // namespace kvtier

#endif  // KVTIER_TESTING_SMALL_CACHE_H_
