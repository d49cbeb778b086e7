// BlockCache's residency events (storage/block_event.h): the sink that
// HostTier reports to, and snapshots of what the cache holds.
#include <vector>

#include "storage/block_cache.h"

namespace kvtier {

void BlockCache::SetEventSink(BlockEventSink* sink) {
  MutexLock lock(&mu_);
  host_.set_events(sink);
}

void BlockCache::SnapshotInto(BlockEventSink* into, absl::FunctionRef<void()> then) {
  MutexLock lock(&mu_);
  // Parents before children (a consumer's index links a block to its
  // parent), so roots first, then each root's subtree depth first.
  std::vector<const BlockRecord*> stack;
  index_.ForEach([&](const BlockRecord& r) {
    if (r.parent == nullptr) stack.push_back(&r);
  });
  while (!stack.empty()) {
    const BlockRecord* r = stack.back();
    stack.pop_back();
    BlockEvent e{.kind = BlockEvent::Kind::kStored,
                 .medium = Medium::kHost,
                 .ns = r->ns,
                 .key = r->key,
                 .parent = r->parent_key(),
                 .size = r->size};
    if (r->in_host) into->OnBlockEvent(e);
    if (r->on_nvme) {
      e.medium = Medium::kNvme;
      into->OnBlockEvent(e);
    }
    for (BlockRecord* child : r->children()) stack.push_back(child);
  }
  then();
}

}  // namespace kvtier
