// LeafLruPolicy: the reference policy. A block's priority is its last
// access, so the tiers reclaim the least recently used candidate (an
// unpinned leaf, by the index's rule): leaf-restricted LRU.
//
// Thread-safety: see EvictionPolicy.
#ifndef KVTIER_STORAGE_EVICTION_LEAF_LRU_POLICY_H_
#define KVTIER_STORAGE_EVICTION_LEAF_LRU_POLICY_H_

#include "storage/eviction/eviction_policy.h"

namespace kvtier {

class LeafLruPolicy final : public EvictionPolicy {
 public:
  absl::string_view name() const override { return "lru"; }
  void OnInsert(BlockRecord*) override {}
  double Priority(const BlockRecord& record) const override;
  double clock() const override { return 0; }
  void OnReclaim(const BlockRecord&, double, bool, size_t) override {}
  void SetDefaultValue(double) override {}
  size_t memory_bytes() const override { return 0; }
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_EVICTION_LEAF_LRU_POLICY_H_
