// vLLM's KV event wire format (vllm.distributed.kv_events, as vLLM's
// ZmqEventPublisher sends it and KV-aware routers' indexers read it), for
// kvtier's residency events. One payload is a msgpack KVEventBatch, an
// array-like struct:
//   [ts: float64, events: [event...]]
// with each event a tagged array-like struct:
//   ["BlockStored", block_hashes: [bin...], parent_block_hash: bin|nil,
//    token_ids: [], block_size: int, lora_id: nil, medium: str,
//    lora_name: nil]
//   ["BlockRemoved", block_hashes: [bin...], medium: str]
//   ["AllBlocksCleared"]
// Block hashes are kvtier's block keys (the engine's block hashes, as the
// connectors give them), as msgpack bin. kvtier does not hold the tokens,
// so token_ids is empty; block_size is the namespace's tokens per block.
// Medium: "CPU" for the host tier, "STORAGE" for NVMe.
//
// Consecutive stored events of one medium that form a chain (each the
// parent's child) become one BlockStored; consecutive removals of one
// medium one BlockRemoved; the order of events is kept.
#ifndef KVTIER_EVENTS_VLLM_EVENT_BATCH_H_
#define KVTIER_EVENTS_VLLM_EVENT_BATCH_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "storage/block_event.h"

namespace kvtier {

// `events` are of one namespace, whose blocks hold `tokens_per_block`
// tokens. `all_cleared_first`: the batch starts with AllBlocksCleared (a
// consumer drops what it knew of this publisher before the rest).
std::string EncodeVllmEventBatch(double ts, absl::Span<const BlockEvent> events,
                                 uint32_t tokens_per_block, bool all_cleared_first);

}  // namespace kvtier

#endif  // KVTIER_EVENTS_VLLM_EVENT_BATCH_H_
