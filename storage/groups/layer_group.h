// LayerGroup: a set of a model's layers with one caching rule, the shape in
// which hybrid models (gpt-oss, Gemma 3, Qwen3-Next, Nemotron-H, Jamba,
// Mamba-2) are cached. It follows what engines expose: vLLM's KV cache
// groups (FullAttentionSpec, SlidingWindowSpec, MambaSpec) and SGLang's
// separate SWA and Mamba pools.
//
//   kFullAttention  every block of the prefix is kept (MLA latents too): a
//                   restore at cut k needs the group's blocks [0, k);
//   kSlidingWindow  the layers attend to the last `window_tokens` tokens: a
//                   restore at cut k needs only the blocks covering the last
//                   w tokens before it, [k - ceil(w / tokens_per_block), k);
//   kRecurrent      (Mamba-2, gated linear attention) the state is not a
//                   function of the KV blocks: a restore at cut k needs a
//                   snapshot of the state taken after block k - 1, of
//                   `state_bytes` for this rank.
//
// A namespace with no groups is the one-group case (every layer full
// attention), with the ids it always had.
//
// Thread-safety: value types and pure functions.
#ifndef KVTIER_STORAGE_GROUPS_LAYER_GROUP_H_
#define KVTIER_STORAGE_GROUPS_LAYER_GROUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvtier {

enum class GroupKind : uint8_t {
  kFullAttention = 0,
  kSlidingWindow = 1,
  kRecurrent = 2,
};

// "full_attention", "sliding_window", "recurrent".
absl::string_view GroupKindName(GroupKind kind);

struct LayerGroup {
  GroupKind kind = GroupKind::kFullAttention;
  // The model's layer indices in this group, strictly increasing, each below
  // the namespace layout's num_layers and in no other group.
  std::vector<uint32_t> layers;
  // kSlidingWindow only: w, the tokens each layer attends to.
  uint32_t window_tokens = 0;
  // kRecurrent only: bytes of one state snapshot of the group's layers on
  // this rank (conv and SSM state), and the checkpoint interval c in tokens,
  // a multiple of tokens_per_block: how often an engine snapshots (it sizes
  // the planner's answer; a snapshot at any block boundary is usable).
  uint64_t state_bytes = 0;
  uint32_t checkpoint_tokens = 0;

  friend bool operator==(const LayerGroup& a, const LayerGroup& b) {
    return a.kind == b.kind && a.layers == b.layers && a.window_tokens == b.window_tokens &&
           a.state_bytes == b.state_bytes && a.checkpoint_tokens == b.checkpoint_tokens;
  }
};

inline constexpr size_t kMaxLayerGroups = 16;
// The widest sliding window, in blocks: it bounds the sweep's walks.
inline constexpr uint32_t kMaxWindowBlocks = 4096;

// The per-block quantities of a layout that groups need (a subset of
// KvLayout, so that this header does not depend on namespace_spec.h).
struct GroupGeometry {
  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t dtype_bytes = 0;
  uint32_t tokens_per_block = 0;
};

// Bytes a group stores per key: 2 (K, V) * its layers * heads * head dim *
// tokens * dtype bytes for attention groups, state_bytes for a recurrent one.
// INVALID_ARGUMENT on overflow or a zero factor.
absl::StatusOr<uint64_t> GroupBlockBytes(const GroupGeometry& geometry, const LayerGroup& group);

// Blocks a sliding-window group needs before a cut: ceil(w / tokens_per_block).
// 0 for the other kinds.
uint32_t WindowBlocks(const LayerGroup& group, uint32_t tokens_per_block);

// INVALID_ARGUMENT naming the offending group and field ("groups[1].window_tokens
// ..."), or OK. Valid groups: 1..16 of them; each with 1+ layers as above;
// only its own kind's fields set; a sliding window > 0 of at most
// kMaxWindowBlocks blocks; a recurrent state
// of 1+ bytes with a checkpoint interval that is a positive multiple of
// tokens_per_block; each group's block at most `max_block_bytes`; and a
// sliding-window group only beside a full-attention group (its blocks are
// placed on the full-attention chain).
absl::Status ValidateLayerGroups(absl::Span<const LayerGroup> groups, const GroupGeometry& geometry,
                                 uint64_t max_block_bytes);

// True when `groups` says nothing a namespace without groups does not:
// empty, or one full-attention group of every layer 0..num_layers-1.
// Such specs are normalized to no groups, so their ids stay the one-group ids.
bool IsSingleFullGroup(absl::Span<const LayerGroup> groups, uint32_t num_layers);

// Canonical bytes of `groups` for the namespace fingerprint.
std::string CanonicalGroups(absl::Span<const LayerGroup> groups);

}  // namespace kvtier

#endif  // KVTIER_STORAGE_GROUPS_LAYER_GROUP_H_
