#include "storage/groups/layer_group.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace kvtier {
namespace {

void AppendU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

absl::Status GroupError(size_t i, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("groups[", i, "].", field, " ", what));
}

}  // namespace

absl::string_view GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kFullAttention:
      return "full_attention";
    case GroupKind::kSlidingWindow:
      return "sliding_window";
    case GroupKind::kRecurrent:
      return "recurrent";
  }
  return "unknown";
}

absl::StatusOr<uint64_t> GroupBlockBytes(const GroupGeometry& g, const LayerGroup& group) {
  if (group.kind == GroupKind::kRecurrent) {
    if (group.state_bytes == 0) return absl::InvalidArgumentError("state_bytes is 0");
    return group.state_bytes;
  }
  const uint64_t factors[] = {2,          group.layers.size(), g.num_kv_heads,
                              g.head_dim, g.tokens_per_block,  g.dtype_bytes};
  uint64_t bytes = 1;
  for (uint64_t f : factors) {
    if (f == 0) return absl::InvalidArgumentError("group layout has a zero factor");
    if (__builtin_mul_overflow(bytes, f, &bytes)) {
      return absl::InvalidArgumentError("group's block size overflows 64 bits");
    }
  }
  return bytes;
}

uint32_t WindowBlocks(const LayerGroup& group, uint32_t tokens_per_block) {
  if (group.kind != GroupKind::kSlidingWindow || tokens_per_block == 0) return 0;
  const uint64_t blocks = (uint64_t{group.window_tokens} + tokens_per_block - 1) / tokens_per_block;
  return static_cast<uint32_t>(std::min<uint64_t>(blocks, kMaxWindowBlocks + 1));
}

absl::Status ValidateLayerGroups(absl::Span<const LayerGroup> groups, const GroupGeometry& geometry,
                                 uint64_t max_block_bytes) {
  if (groups.empty() || groups.size() > kMaxLayerGroups) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups: ", groups.size(), " given; must be 1..", kMaxLayerGroups));
  }
  absl::flat_hash_set<uint32_t> seen;
  bool has_full = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    const LayerGroup& g = groups[i];
    if (g.layers.empty()) return GroupError(i, "layers", "is empty");
    for (size_t j = 0; j < g.layers.size(); ++j) {
      const uint32_t layer = g.layers[j];
      if (layer >= geometry.num_layers) {
        return GroupError(
            i, "layers",
            absl::StrCat("names layer ", layer, "; layout.num_layers is ", geometry.num_layers));
      }
      if (j > 0 && layer <= g.layers[j - 1]) {
        return GroupError(i, "layers", "must be strictly increasing");
      }
      if (!seen.insert(layer).second) {
        return GroupError(i, "layers", absl::StrCat("names layer ", layer, ", already in a group"));
      }
    }
    switch (g.kind) {
      case GroupKind::kFullAttention:
        has_full = true;
        if (g.window_tokens != 0) return GroupError(i, "window_tokens", "is for sliding_window");
        if (g.state_bytes != 0 || g.checkpoint_tokens != 0) {
          return GroupError(i, "state_bytes", "is for recurrent groups");
        }
        break;
      case GroupKind::kSlidingWindow:
        if (g.window_tokens == 0) return GroupError(i, "window_tokens", "must be > 0");
        if (WindowBlocks(g, geometry.tokens_per_block) > kMaxWindowBlocks) {
          return GroupError(i, "window_tokens",
                            absl::StrCat("is ", g.window_tokens, "; at most ", kMaxWindowBlocks,
                                         " blocks of tokens_per_block are supported"));
        }
        if (g.state_bytes != 0 || g.checkpoint_tokens != 0) {
          return GroupError(i, "state_bytes", "is for recurrent groups");
        }
        break;
      case GroupKind::kRecurrent:
        if (g.window_tokens != 0) return GroupError(i, "window_tokens", "is for sliding_window");
        if (g.state_bytes == 0) return GroupError(i, "state_bytes", "must be > 0");
        if (g.checkpoint_tokens == 0 || geometry.tokens_per_block == 0 ||
            g.checkpoint_tokens % geometry.tokens_per_block != 0) {
          return GroupError(i, "checkpoint_tokens",
                            absl::StrCat("is ", g.checkpoint_tokens,
                                         "; must be a positive multiple of tokens_per_block ",
                                         geometry.tokens_per_block));
        }
        break;
      default:
        return GroupError(i, "kind", "is unknown");
    }
    absl::StatusOr<uint64_t> bytes = GroupBlockBytes(geometry, g);
    if (!bytes.ok()) return GroupError(i, "layers", bytes.status().message());
    if (*bytes > max_block_bytes) {
      return GroupError(i, g.kind == GroupKind::kRecurrent ? "state_bytes" : "layers",
                        absl::StrCat("make a block of ", *bytes,
                                     " bytes; this daemon's max_block_bytes is ", max_block_bytes));
    }
  }
  if (!has_full) {
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].kind == GroupKind::kSlidingWindow) {
        return GroupError(i, "kind",
                          "sliding_window needs a full_attention group in the namespace (its "
                          "blocks are placed on the full-attention chain)");
      }
    }
  }
  return absl::OkStatus();
}

bool IsSingleFullGroup(absl::Span<const LayerGroup> groups, uint32_t num_layers) {
  if (groups.empty()) return true;
  if (groups.size() != 1) return false;
  const LayerGroup& g = groups[0];
  if (g.kind != GroupKind::kFullAttention || g.layers.size() != num_layers) return false;
  for (uint32_t i = 0; i < num_layers; ++i) {
    if (g.layers[i] != i) return false;
  }
  return g.window_tokens == 0 && g.state_bytes == 0 && g.checkpoint_tokens == 0;
}

std::string CanonicalGroups(absl::Span<const LayerGroup> groups) {
  std::string out = "groups.v1";
  AppendU64(&out, groups.size());
  for (const LayerGroup& g : groups) {
    AppendU64(&out, static_cast<uint8_t>(g.kind));
    AppendU64(&out, g.layers.size());
    for (uint32_t layer : g.layers) AppendU64(&out, layer);
    AppendU64(&out, g.window_tokens);
    AppendU64(&out, g.state_bytes);
    AppendU64(&out, g.checkpoint_tokens);
  }
  return out;
}

}  // namespace kvtier
