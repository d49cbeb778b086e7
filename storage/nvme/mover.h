// Mover: one pass of the NVMe mover, in three phases so that the owner can
// release its mutex around the I/O. Select (locked) picks, by the write
// policy's DecideDemotion, the coldest host-only leaves the policy wants
// written and their ancestors not yet on NVMe (parents first: the persisted
// set stays prefix-closed), pins them and reserves their NVMe slots and
// wear; Write (unlocked) writes the slots and commits their catalog
// entries; Finish (locked) publishes what was written and unpins. Balance
// (locked) then brings host and NVMe occupancy under their low watermarks.
// The owner runs the background thread and serializes passes.
//
// Thread-safety: externally synchronized; REQUIRES: the owner's
// (BlockCache's) mutex held for Select, Finish and Balance, and NOT held
// for Write (it only touches the pass and thread-safe NVMe I/O).
#ifndef KVTIER_STORAGE_NVME_MOVER_H_
#define KVTIER_STORAGE_NVME_MOVER_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "storage/cache_stats.h"
#include "storage/host_tier.h"
#include "storage/namespace_table.h"
#include "storage/nvme/nvme_store.h"
#include "storage/nvme/nvme_tier.h"
#include "storage/prefix_index.h"

namespace kvtier {

class Mover {
 public:
  // The blocks of one pass, parents before their children.
  struct Pass {
    std::vector<BlockRecord*> blocks;  // pinned until Finish
    std::vector<NvmeWrite> writes;     // one per block
    std::vector<absl::Status> results;
    absl::Status committed;
    bool empty() const { return blocks.empty(); }
  };

  // None owned; all must outlive it.
  Mover(NvmeTier* nvme, HostTier* host, PrefixIndex* index, const NamespaceTable* namespaces,
        CacheCounters* counters)
      : nvme_(nvme), host_(host), index_(index), namespaces_(namespaces), counters_(counters) {}
  Mover(const Mover&) = delete;
  Mover& operator=(const Mover&) = delete;

  Pass Select();
  void Write(Pass& pass);
  // Returns how many blocks were written (and are still cached).
  size_t Finish(Pass& pass);
  void Balance();

 private:
  NvmeTier* const nvme_;
  HostTier* const host_;
  PrefixIndex* const index_;
  const NamespaceTable* const namespaces_;
  CacheCounters* const counters_;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NVME_MOVER_H_
