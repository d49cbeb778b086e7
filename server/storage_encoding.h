// Storage encodings of namespaces: the OpenNamespace request's
// StorageEncoding validated into the canonical string kept in NamespaceSpec
// ("fp8-e4m3/<engine layout>/g<K group tokens>"), the BlockTransform that
// string stands for, and NamespaceTransforms, the daemon's table of the
// transforms of its open namespaces (shared by the KvCache and Admin
// services).
//
// Thread-safety: the functions are pure; NamespaceTransforms is thread-safe.
#ifndef KVTIER_SERVER_STORAGE_ENCODING_H_
#define KVTIER_SERVER_STORAGE_ENCODING_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "encoding/block_transform.h"
#include "kvtier/v1/kvcache.pb.h"
#include "storage/namespace_spec.h"

namespace kvtier {

// The canonical encoding for `layout`; "" for PLAIN. INVALID_ARGUMENT naming
// the field for an unknown kind or engine layout, a K group outside
// [1, tokens_per_block], or a dtype that is already 8-bit.
absl::StatusOr<std::string> CanonicalEncoding(const v1::StorageEncoding& encoding,
                                              const KvLayout& layout);

// The transform of spec.encoding; nullptr when it is "".
absl::StatusOr<std::shared_ptr<BlockTransform>> TransformFor(const NamespaceSpec& spec);

class NamespaceTransforms {
 public:
  // Keeps the first transform set for a namespace (its counters go on).
  std::shared_ptr<BlockTransform> Set(const NamespaceId& ns,
                                      std::shared_ptr<BlockTransform> transform)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets a closed namespace's transform (calls holding it keep it). The
  // caller must set it again before the namespace opens again.
  void Remove(const NamespaceId& ns) ABSL_LOCKS_EXCLUDED(mu_);
  // nullptr for a namespace stored as given.
  std::shared_ptr<BlockTransform> Find(const NamespaceId& ns) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<NamespaceId, std::shared_ptr<BlockTransform>> transforms_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_STORAGE_ENCODING_H_
