// BlockEvent: a block entered or left one tier of the cache (host memory or
// NVMe), and BlockEventSink, the seam through which BlockCache reports
// every such change to whoever publishes them (events/: the daemon's event
// bus, vLLM-format KV events over ZeroMQ, Admin.WatchBlocks).
//
// Guarantees (tested in block_event_test.cc): with a sink set, a block that
// becomes readable from a tier is reported kStored for that medium before
// any caller can see it there, and a block that leaves a tier is reported
// kRemoved for that medium in the same hold of the cache's lock; events
// reach the sink in the order the cache changed. A block on both tiers was
// reported stored on both. Replaying a sink's events over the state at
// BlockCache::SnapshotInto gives the cache's current contents.
//
// Hybrid namespaces: their groups' blocks carry the group's storage id
// (NamespaceId::OfGroup), not the namespace's id.
#ifndef KVTIER_STORAGE_BLOCK_EVENT_H_
#define KVTIER_STORAGE_BLOCK_EVENT_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"

namespace kvtier {

enum class Medium : uint8_t { kHost, kNvme };

// vLLM's names for the media (vllm.distributed.kv_events MEDIUM_CPU and
// MEDIUM_STORAGE).
inline absl::string_view MediumName(Medium m) { return m == Medium::kHost ? "CPU" : "STORAGE"; }

struct BlockEvent {
  enum class Kind : uint8_t { kStored, kRemoved };
  Kind kind = Kind::kStored;
  Medium medium = Medium::kHost;
  NamespaceId ns;
  BlockKey key;
  BlockKey parent;  // empty for a root block
  uint64_t size = 0;

  friend bool operator==(const BlockEvent&, const BlockEvent&) = default;
};

// Called with the cache's lock held: an implementation must be quick, must
// not block on anything but its own short lock, and must not call back into
// the cache.
class BlockEventSink {
 public:
  virtual ~BlockEventSink() = default;
  virtual void OnBlockEvent(const BlockEvent& event) = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_BLOCK_EVENT_H_
