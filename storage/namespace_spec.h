// NamespaceSpec: everything that must match for two blocks to be
// interchangeable (model id, KV layout of one rank, salt, tenant), its
// validation, the size of one block, and its fingerprint (NamespaceId).
//
// Thread-safety: value types and pure functions.
#ifndef KVTIER_STORAGE_NAMESPACE_SPEC_H_
#define KVTIER_STORAGE_NAMESPACE_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/groups/layer_group.h"

namespace kvtier {

enum class DType : uint8_t {
  kUnspecified = 0,
  kBf16 = 1,
  kFp16 = 2,
  kFp32 = 3,
  kFp8E4m3 = 4,
  kFp8E5m2 = 5,
};

// Bytes per element; 0 for kUnspecified.
uint32_t DTypeBytes(DType dtype);

struct KvLayout {
  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  DType dtype = DType::kUnspecified;
  uint32_t tokens_per_block = 0;
  uint32_t tp_rank = 0;
  uint32_t tp_size = 1;
  // MLA: one latent vector of head_dim elements per token and layer, no
  // separate V (num_kv_heads must be 1; no layer groups).
  bool latent = false;
};

struct NamespaceSpec {
  std::string model_id;
  KvLayout layout;
  std::string salt;
  // The storage encoding, canonical ("" = blocks stored as given; else e.g.
  // "fp8-e4m3/vllm-nhd/g16", see server/storage_encoding.h). Storage treats
  // it as opaque identity: it only enters the fingerprint.
  std::string encoding;
  // The tenant that owns the namespace ("" = none: a daemon without
  // authentication). Set by the server from the caller's authenticated
  // identity, never by the client, and bound into the fingerprint: two
  // tenants opening the same model, layout and salt get different
  // namespaces, so they never share (or time) each other's blocks.
  std::string tenant;
  // The layer groups of a hybrid model (storage/groups/layer_group.h); empty
  // for the one-group case, in which every layer is full attention. A spec
  // whose groups are one full-attention group of every layer is the same
  // namespace as one without groups (same id).
  std::vector<LayerGroup> groups;

  bool hybrid() const { return !IsSingleFullGroup(groups, layout.num_layers); }
};

// The layout quantities a group's block size depends on.
GroupGeometry GeometryOf(const KvLayout& layout);

inline constexpr size_t kMaxModelIdBytes = 256;
inline constexpr size_t kMaxSaltBytes = 256;

// 2 (K and V; 1 for a latent layout) * layers * kv heads * head dim *
// tokens * dtype bytes.
// INVALID_ARGUMENT if a factor is zero or the product overflows 64 bits.
absl::StatusOr<uint64_t> BlockBytes(const KvLayout& layout);

// INVALID_ARGUMENT naming the first offending field, or OK. A spec is valid
// when every layout field is set, tp_rank < tp_size, the model id is
// 1..256 bytes, the salt at most 256 bytes, and a block is at most
// `max_block_bytes`; a hybrid spec's groups are valid (ValidateLayerGroups,
// with each group's block at most `max_block_bytes`).
absl::Status ValidateNamespaceSpec(const NamespaceSpec& spec, uint64_t max_block_bytes);

// 128-bit fingerprint of a namespace spec, written as 32 hex digits.
class NamespaceId {
 public:
  // Fingerprint of every field of `spec` (tp_size 0 reads as 1).
  static NamespaceId Of(const NamespaceSpec& spec);
  // INVALID_ARGUMENT unless `hex` is exactly 32 hex digits.
  static absl::StatusOr<NamespaceId> FromHex(absl::string_view hex);
  // The id under which group `group` of the hybrid namespace `ns` stores its
  // bytes: a namespace of its own in every tier (index, host, NVMe,
  // catalog), so each group is held, evicted, persisted and recovered
  // independently, and never matches another group or namespace.
  static NamespaceId OfGroup(const NamespaceId& ns, uint32_t group);

  // From the two halves written by high() and low() (e.g. in a slot header).
  static NamespaceId FromParts(uint64_t high, uint64_t low) { return NamespaceId(high, low); }

  NamespaceId() = default;
  std::string ToHex() const;
  uint64_t high() const { return high_; }
  uint64_t low() const { return low_; }

  friend bool operator==(const NamespaceId& a, const NamespaceId& b) {
    return a.high_ == b.high_ && a.low_ == b.low_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const NamespaceId& id) {
    return H::combine(std::move(h), id.high_, id.low_);
  }

 private:
  NamespaceId(uint64_t high, uint64_t low) : high_(high), low_(low) {}
  uint64_t high_ = 0;
  uint64_t low_ = 0;
};

}  // namespace kvtier

#endif  // KVTIER_STORAGE_NAMESPACE_SPEC_H_
