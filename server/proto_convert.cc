#include "server/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/storage_encoding.h"

namespace kvtier {

absl::StatusOr<NamespaceSpec> NamespaceSpecFromProto(const v1::OpenNamespaceRequest& request) {
  if (!request.has_layout()) return absl::InvalidArgumentError("layout is required");
  const v1::NamespaceLayout& l = request.layout();
  DType dtype;
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
      return absl::InvalidArgumentError("layout.dtype must be set");
    default:
      return absl::InvalidArgumentError(absl::StrCat("layout.dtype ", l.dtype(), " is unknown"));
  }
  NamespaceSpec spec;
  spec.model_id = request.model_id();
  spec.salt = request.salt();
  spec.layout = KvLayout{l.num_layers(),       l.num_kv_heads(), l.head_dim(), dtype,
                         l.tokens_per_block(), l.tp_rank(),      l.tp_size()};
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
    const std::string& namespace_id, const google::protobuf::RepeatedPtrField<std::string>& keys) {
  ASSIGN_OR_RETURN(NamespaceId ns, NamespaceIdFromProto(namespace_id));
  ASSIGN_OR_RETURN(std::vector<BlockKey> parsed, KeysFromProto(keys));
  return NamespaceKeys{ns, std::move(parsed)};
}

absl::StatusOr<BlockKey> OptionalKeyFromProto(absl::string_view bytes, const char* field) {
  if (bytes.empty()) return BlockKey();
  absl::StatusOr<BlockKey> k = BlockKey::Create(bytes);
  if (!k.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", k.status().message()));
  return k;
}

}  // namespace kvtier
