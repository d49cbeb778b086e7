// vLLM's KV event wire format (vllm.distributed.kv_events, as vLLM's
// ZmqEventPublisher sends it and KV-aware routers' indexers read it), for
// kvtier's residency events. One payload is a msgpack KVEventBatch, an
// array-like struct:
//   [ts: float64, events: [event...]]
// with each event a tagged array-like struct:
//   ["BlockStored", block_hashes: [hash...], parent_block_hash: hash|nil,
//    token_ids: [], block_size: int, lora_id: nil, medium: str,
//    lora_name: nil]
//   ["BlockRemoved", block_hashes: [hash...], medium: str]
//   ["AllBlocksCleared"]
// A hash is a kvtier block key (the engine's block hash, as the connectors
// pass it): with int_hashes, as vLLM sends them by default
// (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES), the key read as a big-endian
// integer and cut to its low 64 bits (a uint64); otherwise its bytes (bin).
// kvtier does not hold the tokens, so token_ids is empty; block_size is the
// block's namespace's tokens per block. Medium: "CPU" for the host tier,
// "STORAGE" for NVMe.
//
// Consecutive stored events of one namespace and medium that form a chain
// (each the previous one's child) become one BlockStored; consecutive
// removals of one namespace and medium one BlockRemoved; the order of
// events is kept.
#ifndef KVTIER_EVENTS_VLLM_EVENT_BATCH_H_
#define KVTIER_EVENTS_VLLM_EVENT_BATCH_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "storage/block_event.h"

namespace kvtier {

struct VllmBatchOptions {
  bool int_hashes = true;
  // Tokens per block of a namespace (each BlockStored's block_size).
  absl::FunctionRef<uint32_t(const NamespaceId&)> block_size;
  // The batch starts with AllBlocksCleared: a consumer drops what it knew
  // of this publisher before the rest.
  bool all_cleared_first = false;
};

std::string EncodeVllmEventBatch(double ts, absl::Span<const BlockEvent> events,
                                 const VllmBatchOptions& options);

// The integer form of a block hash: `key` as a big-endian number, low 64
// bits (vLLM's maybe_convert_block_hash).
uint64_t IntBlockHash(const BlockKey& key);

}  // namespace kvtier

#endif  // KVTIER_EVENTS_VLLM_EVENT_BATCH_H_
