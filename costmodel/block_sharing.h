// Prompts as chains of blocks, block sharing (question 6) and stranding under
// an eviction order (question 5).
//
// A block is shared only when its whole prefix matches, so prompts become
// chains of prefix-block ids; a partly full last block is never shared
// across prompts, and with parallel sampling it is copied when the samples
// append to it (copy-on-write).
//
// Thread-safety: stateless functions.
#ifndef KVTIER_COSTMODEL_BLOCK_SHARING_H_
#define KVTIER_COSTMODEL_BLOCK_SHARING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvtier::costmodel {

struct PromptChain {
  std::vector<uint32_t> blocks;  // ids of full blocks; equal id = equal prefix
  bool partial_tail = false;     // a partly full last block follows
};

struct PromptSet {
  std::vector<PromptChain> prompts;
  uint32_t node_count = 0;           // distinct full-block prefixes
  std::vector<uint32_t> parent;      // parent id + 1 per node (0 = root)
  uint32_t block_tokens = 0;         // tokens per block used
  bool from_trace_hash_ids = false;  // Mooncake hash_ids: trace's own block size
};

// JSONL, one prompt per line: a list of token ids, {"tokens": [...]}, or a
// Mooncake trace record {"input_length": n, "hash_ids": [...]} (blocks of
// trace_block_tokens). INVALID_ARGUMENT naming the line otherwise.
absl::StatusOr<PromptSet> ParsePrompts(absl::string_view jsonl, uint32_t block_tokens,
                                       uint32_t trace_block_tokens = 512);

struct SharingReport {
  uint64_t prompts = 0;
  uint64_t blocks_without_sharing = 0;
  uint64_t blocks_with_sharing = 0;
  double saving_fraction = 0;
  uint64_t cow_copies = 0;
  uint64_t partial_blocks = 0;
};

// `samples` sequences per prompt (parallel sampling), >= 1.
SharingReport AnalyzeSharing(const PromptSet& set, uint32_t samples);

struct EvictionReport {
  uint64_t lookups = 0;  // blocks looked up
  uint64_t hits = 0;     // blocks found from the first block forward
  uint64_t evictions = 0;
  uint64_t stranded_blocks_final = 0;
  uint64_t stranded_blocks_peak = 0;
};

// Replays the prompts through a cache of `capacity_blocks` full blocks with
// LRU eviction of any block (leaf_first = false) or of blocks with no cached
// child only (leaf_first = true). Stranded: cached but unreachable because an
// ancestor is not cached.
EvictionReport SimulateEviction(const PromptSet& set, uint64_t capacity_blocks, bool leaf_first);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_BLOCK_SHARING_H_
