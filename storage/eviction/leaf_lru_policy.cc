#include "storage/eviction/leaf_lru_policy.h"

#include "storage/prefix_index.h"

namespace kvtier {

// Exact below 2^53 accesses; the tick breaks any tie after that.
double LeafLruPolicy::Priority(const BlockRecord& record) const {
  return static_cast<double>(record.last_access);
}

}  // namespace kvtier
