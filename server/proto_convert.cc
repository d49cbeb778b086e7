#include "server/proto_convert.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/storage_encoding.h"

namespace kvtier {

absl::StatusOr<NamespaceSpec> NamespaceSpecFromProto(const v1::OpenNamespaceRequest& request) {
  if (!request.has_layout()) return absl::InvalidArgumentError("layout is required");
  const v1::NamespaceLayout& l = request.layout();
  NamespaceSpec spec;
  for (int i = 0; i < l.groups_size(); ++i) {
    const v1::LayerGroup& g = l.groups(i);
    LayerGroup group;
    switch (g.kind()) {
      case v1::LayerGroup::LAYER_GROUP_FULL_ATTENTION:
        group.kind = GroupKind::kFullAttention;
        break;
      case v1::LayerGroup::LAYER_GROUP_SLIDING_WINDOW:
        group.kind = GroupKind::kSlidingWindow;
        break;
      case v1::LayerGroup::LAYER_GROUP_RECURRENT:
        group.kind = GroupKind::kRecurrent;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("layout.groups[", i, "].kind ", g.kind(), " is unknown"));
    }
    group.layers.assign(g.layers().begin(), g.layers().end());
    group.window_tokens = g.window_tokens();
    group.state_bytes = g.state_bytes();
    group.checkpoint_tokens = g.checkpoint_tokens();
    spec.groups.push_back(std::move(group));
  }
  const bool recurrent_only =
      !spec.groups.empty() &&
      std::all_of(spec.groups.begin(), spec.groups.end(),
                  [](const auto& g) { return g.kind == GroupKind::kRecurrent; });
  DType dtype = DType::kUnspecified;
  switch (l.dtype()) {
    case v1::DTYPE_BF16:
      dtype = DType::kBf16;
      break;
    case v1::DTYPE_FP16:
      dtype = DType::kFp16;
      break;
    case v1::DTYPE_FP32:
      dtype = DType::kFp32;
      break;
    case v1::DTYPE_FP8_E4M3:
      dtype = DType::kFp8E4m3;
      break;
    case v1::DTYPE_FP8_E5M2:
      dtype = DType::kFp8E5m2;
      break;
    case v1::DTYPE_UNSPECIFIED:
      // A model of recurrent layers alone has no KV dtype.
      if (recurrent_only) break;
      return absl::InvalidArgumentError("layout.dtype must be set");
    default:
      return absl::InvalidArgumentError(absl::StrCat("layout.dtype ", l.dtype(), " is unknown"));
  }
  spec.model_id = request.model_id();
  spec.salt = request.salt();
  spec.layout = KvLayout{l.num_layers(),       l.num_kv_heads(), l.head_dim(), dtype,
                         l.tokens_per_block(), l.tp_rank(),      l.tp_size(),  l.latent()};
  if (spec.hybrid() && request.has_encoding() &&
      (request.encoding().kind() != v1::StorageEncoding::STORAGE_ENCODING_PLAIN ||
       !request.encoding().engine_layout().empty() || request.encoding().k_group_tokens() != 0)) {
    return absl::InvalidArgumentError(
        "encoding: storage encodings are not supported with layer groups (layout.groups) yet");
  }
  if (!spec.hybrid()) spec.groups.clear();
  if (spec.hybrid()) return spec;
  ASSIGN_OR_RETURN(std::string encoding, CanonicalEncoding(request.encoding(), spec.layout));
  spec.encoding = std::move(encoding);
  return spec;
}

void LayoutToProto(const KvLayout& layout, v1::NamespaceLayout* out) {
  out->set_num_layers(layout.num_layers);
  out->set_num_kv_heads(layout.num_kv_heads);
  out->set_head_dim(layout.head_dim);
  out->set_dtype(static_cast<v1::DType>(layout.dtype));
  out->set_tokens_per_block(layout.tokens_per_block);
  out->set_tp_rank(layout.tp_rank);
  out->set_tp_size(layout.tp_size);
  out->set_latent(layout.latent);
}

void GroupsToProto(absl::Span<const LayerGroup> groups, v1::NamespaceLayout* out) {
  for (const LayerGroup& g : groups) {
    v1::LayerGroup* p = out->add_groups();
    p->set_kind(static_cast<v1::LayerGroup::Kind>(g.kind));
    for (uint32_t layer : g.layers) p->add_layers(layer);
    p->set_window_tokens(g.window_tokens);
    p->set_state_bytes(g.state_bytes);
    p->set_checkpoint_tokens(g.checkpoint_tokens);
  }
}

absl::Status CheckKeyCount(size_t keys, size_t max_keys) {
  if (keys <= max_keys) return absl::OkStatus();
  // As the cache words it (BlockCache, for a request of no keys as well).
  return absl::InvalidArgumentError(
      absl::StrCat("request has ", keys, " keys; must be 1..", max_keys));
}

absl::StatusOr<NamespaceId> NamespaceIdFromProto(absl::string_view hex) {
  if (hex.empty()) return absl::InvalidArgumentError("namespace_id is required");
  return NamespaceId::FromHex(hex);
}

absl::StatusOr<std::vector<BlockKey>> KeysFromProto(
    const google::protobuf::RepeatedPtrField<std::string>& keys) {
  std::vector<BlockKey> out;
  out.reserve(keys.size());
  for (int i = 0; i < keys.size(); ++i) {
    absl::StatusOr<BlockKey> k = BlockKey::Create(keys[i]);
    if (!k.ok())
      return absl::InvalidArgumentError(absl::StrCat("keys[", i, "]: ", k.status().message()));
    out.push_back(*k);
  }
  return out;
}

absl::StatusOr<NamespaceKeys> NamespaceKeysFromProto(
    const std::string& namespace_id, const google::protobuf::RepeatedPtrField<std::string>& keys,
    size_t max_keys) {
  RETURN_IF_ERROR(CheckKeyCount(static_cast<size_t>(keys.size()), max_keys));
  ASSIGN_OR_RETURN(NamespaceId ns, NamespaceIdFromProto(namespace_id));
  ASSIGN_OR_RETURN(std::vector<BlockKey> parsed, KeysFromProto(keys));
  return NamespaceKeys{ns, std::move(parsed)};
}

absl::StatusOr<NamespaceKeys> LookupKeysFromProto(const v1::LookupRequest& request,
                                                  size_t max_keys) {
  if (request.packed_keys().empty() && request.packed_key_bytes() == 0) {
    return NamespaceKeysFromProto(request.namespace_id(), request.keys(), max_keys);
  }
  if (request.keys_size() > 0) {
    return absl::InvalidArgumentError("set keys or packed_keys, not both");
  }
  const uint32_t width = request.packed_key_bytes();
  if (width == 0 || width > BlockKey::kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("packed_key_bytes is ", width, "; keys are 1..",
                                                   BlockKey::kMaxBytes, " bytes"));
  }
  const absl::string_view packed = request.packed_keys();
  if (packed.size() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("packed_keys holds ", packed.size(),
                                                   " bytes, not a whole number of ", width,
                                                   "-byte keys"));
  }
  RETURN_IF_ERROR(CheckKeyCount(packed.size() / width, max_keys));
  ASSIGN_OR_RETURN(NamespaceId ns, NamespaceIdFromProto(request.namespace_id()));
  NamespaceKeys out{ns, {}};
  out.keys.reserve(packed.size() / width);
  for (size_t at = 0; at < packed.size(); at += width) {
    ASSIGN_OR_RETURN(BlockKey key, BlockKey::Create(packed.substr(at, width)));
    out.keys.push_back(key);
  }
  return out;
}

size_t LookupKeyCount(const v1::LookupRequest& request) {
  const uint32_t width = request.packed_key_bytes();
  return request.keys_size() + (width == 0 ? 0 : request.packed_keys().size() / width);
}

absl::StatusOr<std::optional<uint8_t>> RetentionFromProto(bool has, uint32_t value) {
  if (!has) return std::nullopt;
  if (value > kMaxRetention) {
    return absl::InvalidArgumentError(
        absl::StrCat("retention_priority ", value, " is above ", static_cast<int>(kMaxRetention)));
  }
  return static_cast<uint8_t>(value);
}

absl::StatusOr<BlockKey> OptionalKeyFromProto(absl::string_view bytes, const char* field) {
  if (bytes.empty()) return BlockKey();
  absl::StatusOr<BlockKey> k = BlockKey::Create(bytes);
  if (!k.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", k.status().message()));
  return k;
}

absl::Time CallDeadline(const grpc::ServerContextBase& context) {
  const auto deadline = context.deadline();
  // gRPC reads "no deadline" as the far future; keep absl's arithmetic away from it.
  if (deadline >= std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

}  // namespace kvtier
