// EvictionPolicy: the order in which the tiers reclaim blocks.
//
// PrefixIndex files every reclamation candidate under (priority, tick): the
// priority this policy gives the block when it is inserted or refiled after
// a use, then its last access. The tiers reclaim the lowest first. A policy
// only orders: which blocks are candidates at all (unpinned leaves, host
// copies of NVMe blocks) is the index's rule, so no policy can strand a
// block, and every operation stays O(log n) in the candidate sets.
//
// A priority is a function of the block's record: its uses, retention,
// value, last access, and the policy's clock at its last use (stamped by the
// index as BlockRecord::clock_at_use), so a block filed long after its last
// use (a parent that becomes a leaf) is priced as of that use.
//
// Thread-safety: as PrefixIndex's; its owner serializes every call.
#ifndef KVTIER_STORAGE_EVICTION_EVICTION_POLICY_H_
#define KVTIER_STORAGE_EVICTION_EVICTION_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvtier {

struct BlockRecord;

// Retention priorities, as TensorRT-LLM's KV cache retention: 0..100, higher
// kept longer. 0 means "reclaim first, never write to NVMe": the store gives
// it to the partial last block of a Put unless the engine asks otherwise.
inline constexpr uint8_t kMinRetention = 0;
inline constexpr uint8_t kDefaultRetention = 35;
inline constexpr uint8_t kMaxRetention = 100;

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // "value" or "lru" (EvictionPolicyByName).
  virtual absl::string_view name() const = 0;

  // A block is about to be indexed. The policy may raise record->uses when
  // it has seen the block before (a block evicted and Put again).
  virtual void OnInsert(BlockRecord* record) = 0;

  // The priority `record` is filed under. Lower is reclaimed first.
  virtual double Priority(const BlockRecord& record) const = 0;

  // The policy's clock, stamped on a block at each use. It changes only in
  // OnReclaim.
  virtual double clock() const = 0;

  // The tiers reclaimed `record`: its host copy (dropped = false) or the
  // whole block (dropped = true). `priority` is the lowest priority among
  // the candidates it was reclaimed from (at most its own); `indexed` is the
  // number of blocks indexed at that moment.
  virtual void OnReclaim(const BlockRecord& record, double priority, bool dropped,
                         size_t indexed) = 0;

  // What a block whose record carries no value (its namespace has none) is
  // worth per byte: BlockCache passes the mean of the namespaces that have
  // one (0: none has).
  virtual void SetDefaultValue(double seconds_per_byte) = 0;

  // Bytes of the policy's own state (its history), for the index overhead.
  virtual size_t memory_bytes() const = 0;
};

// "value" (the default: ValuePolicy) or "lru" (LeafLruPolicy); any other
// name is INVALID_ARGUMENT.
absl::StatusOr<std::unique_ptr<EvictionPolicy>> EvictionPolicyByName(absl::string_view name);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_EVICTION_EVICTION_POLICY_H_
