#include "storage/namespace_spec.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/checksum.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

void AppendU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void AppendBytes(std::string* out, absl::string_view bytes) {
  AppendU64(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

}  // namespace

uint32_t DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kFp32:
      return 4;
    case DType::kFp8E4m3:
    case DType::kFp8E5m2:
      return 1;
    case DType::kUnspecified:
      break;
  }
  return 0;
}

absl::StatusOr<uint64_t> BlockBytes(const KvLayout& layout) {
  const uint64_t factors[] = {layout.latent ? 1u : 2u, layout.num_layers,
                              layout.num_kv_heads,     layout.head_dim,
                              layout.tokens_per_block, DTypeBytes(layout.dtype)};
  uint64_t bytes = 1;
  for (uint64_t f : factors) {
    if (f == 0) {
      return absl::InvalidArgumentError("layout has a zero factor");
    }
    if (__builtin_mul_overflow(bytes, f, &bytes)) {
      return absl::InvalidArgumentError("layout's block size overflows 64 bits");
    }
  }
  return bytes;
}

GroupGeometry GeometryOf(const KvLayout& layout) {
  return GroupGeometry{.num_layers = layout.num_layers,
                       .num_kv_heads = layout.num_kv_heads,
                       .head_dim = layout.head_dim,
                       .dtype_bytes = DTypeBytes(layout.dtype),
                       .tokens_per_block = layout.tokens_per_block};
}

absl::Status ValidateNamespaceSpec(const NamespaceSpec& spec, uint64_t max_block_bytes) {
  const KvLayout& l = spec.layout;
  if (spec.model_id.empty() || spec.model_id.size() > kMaxModelIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("model_id is ", spec.model_id.size(),
                                                   " bytes; must be 1..", kMaxModelIdBytes));
  }
  if (spec.salt.size() > kMaxSaltBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("salt is ", spec.salt.size(), " bytes; must be at most ", kMaxSaltBytes));
  }
  if (l.num_layers == 0) return absl::InvalidArgumentError("layout.num_layers must be > 0");
  // A namespace of recurrent groups alone (a pure Mamba model) has no KV
  // heads: the attention fields are not needed then.
  bool attention = !spec.hybrid();
  for (const LayerGroup& g : spec.groups) attention |= g.kind != GroupKind::kRecurrent;
  if (attention && l.num_kv_heads == 0) {
    return absl::InvalidArgumentError("layout.num_kv_heads must be > 0");
  }
  if (attention && l.head_dim == 0) {
    return absl::InvalidArgumentError("layout.head_dim must be > 0");
  }
  if (attention && DTypeBytes(l.dtype) == 0) {
    return absl::InvalidArgumentError("layout.dtype must be set");
  }
  if (l.tokens_per_block == 0) {
    return absl::InvalidArgumentError("layout.tokens_per_block must be > 0");
  }
  const uint32_t tp_size = l.tp_size == 0 ? 1 : l.tp_size;
  if (l.tp_rank >= tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout.tp_rank ", l.tp_rank, " must be < tp_size ", tp_size));
  }
  if (l.latent && spec.hybrid()) {
    return absl::InvalidArgumentError(
        "layout.latent (MLA) is not supported with layer groups (layout.groups)");
  }
  if (l.latent && l.num_kv_heads != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout.latent (MLA) stores one latent vector per token: num_kv_heads must be 1, not ",
        l.num_kv_heads));
  }
  if (spec.hybrid()) {
    return ValidateLayerGroups(spec.groups, GeometryOf(l), max_block_bytes);
  }
  ASSIGN_OR_RETURN(uint64_t bytes, BlockBytes(l));
  if (bytes > max_block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a block of this layout is ", bytes,
                                                   " bytes; this daemon's max_block_bytes is ",
                                                   max_block_bytes));
  }
  return absl::OkStatus();
}

NamespaceId NamespaceId::Of(const NamespaceSpec& spec) {
  std::string canonical = "kvtier.namespace.v1";
  AppendBytes(&canonical, spec.model_id);
  const KvLayout& l = spec.layout;
  for (uint64_t v : {uint64_t{l.num_layers}, uint64_t{l.num_kv_heads}, uint64_t{l.head_dim},
                     uint64_t{static_cast<uint8_t>(l.dtype)}, uint64_t{l.tokens_per_block},
                     uint64_t{l.tp_rank}, uint64_t{l.tp_size == 0 ? 1u : l.tp_size}}) {
    AppendU64(&canonical, v);
  }
  AppendBytes(&canonical, spec.salt);
  // Added after v1 ids were in use: plain namespaces keep their ids.
  if (!spec.encoding.empty()) AppendBytes(&canonical, absl::StrCat("encoding=", spec.encoding));
  if (!spec.tenant.empty()) AppendBytes(&canonical, absl::StrCat("tenant=", spec.tenant));
  if (spec.hybrid()) AppendBytes(&canonical, CanonicalGroups(spec.groups));
  if (l.latent) AppendBytes(&canonical, "latent");
  Hash128 h = Fingerprint128(canonical);
  return NamespaceId(h.high, h.low);
}

absl::StatusOr<NamespaceId> NamespaceId::FromHex(absl::string_view hex) {
  if (hex.size() != 32 ||
      hex.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("namespace_id '", hex.substr(0, 80), "' is not 32 hex digits"));
  }
  std::string bytes = absl::HexStringToBytes(hex);
  uint64_t high = 0, low = 0;
  for (int i = 0; i < 8; ++i) {
    high = (high << 8) | static_cast<uint8_t>(bytes[i]);
    low = (low << 8) | static_cast<uint8_t>(bytes[8 + i]);
  }
  return NamespaceId(high, low);
}

NamespaceId NamespaceId::OfGroup(const NamespaceId& ns, uint32_t group) {
  std::string canonical = "kvtier.group.v1";
  AppendU64(&canonical, ns.high());
  AppendU64(&canonical, ns.low());
  AppendU64(&canonical, group);
  Hash128 h = Fingerprint128(canonical);
  return NamespaceId(h.high, h.low);
}

std::string NamespaceId::ToHex() const { return absl::StrFormat("%016x%016x", high_, low_); }

}  // namespace kvtier
