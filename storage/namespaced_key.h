// NamespacedKey: a block's full identity, its namespace and its key, as a
// hashable value for the tables that index blocks across namespaces (the
// prefix index, the GPU tier). The same key in two namespaces is two blocks.
//
// Thread-safety: a value type.
#ifndef KVTIER_STORAGE_NAMESPACED_KEY_H_
#define KVTIER_STORAGE_NAMESPACED_KEY_H_

#include <utility>

#include "storage/block_key.h"
#include "storage/namespace_spec.h"

namespace kvtier {

struct NamespacedKey {
  NamespaceId ns;
  BlockKey key;
  friend bool operator==(const NamespacedKey& a, const NamespacedKey& b) {
    return a.ns == b.ns && a.key == b.key;
  }
  template <typename H>
  friend H AbslHashValue(H h, const NamespacedKey& k) {
    return H::combine(std::move(h), k.ns, k.key);
  }
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NAMESPACED_KEY_H_
