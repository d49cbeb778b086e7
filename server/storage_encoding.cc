#include "server/storage_encoding.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "datapath/engine_layout.h"
#include "encoding/fp8_block_transform.h"

namespace kvtier {
namespace {

constexpr char kFp8[] = "fp8-e4m3";

absl::StatusOr<KvDtype> CodecDtype(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
      return KvDtype::kBf16;
    case DType::kFp16:
      return KvDtype::kFp16;
    case DType::kFp32:
      return KvDtype::kF32;
    default:
      return absl::InvalidArgumentError(
          "encoding: fp8 storage needs a bf16, fp16 or fp32 layout.dtype");
  }
}

}  // namespace

absl::StatusOr<std::string> CanonicalEncoding(const v1::StorageEncoding& encoding,
                                              const KvLayout& layout) {
  switch (encoding.kind()) {
    case v1::StorageEncoding::STORAGE_ENCODING_PLAIN:
      if (!encoding.engine_layout().empty() || encoding.k_group_tokens() != 0) {
        return absl::InvalidArgumentError(
            "encoding: engine_layout and k_group_tokens apply to fp8 only");
      }
      return std::string();
    case v1::StorageEncoding::STORAGE_ENCODING_FP8_E4M3:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("encoding.kind ", static_cast<int>(encoding.kind()), " is unknown"));
  }
  if (layout.latent) {
    return absl::InvalidArgumentError(
        "encoding: fp8 storage is not supported for a latent (MLA) layout yet");
  }
  if (absl::StatusOr<KvDtype> d = CodecDtype(layout.dtype); !d.ok()) return d.status();
  const std::string engine_layout =
      encoding.engine_layout().empty() ? "vllm-nhd" : encoding.engine_layout();
  if (absl::StatusOr<EngineLayoutKind> k = ParseEngineLayoutKind(engine_layout); !k.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoding.engine_layout: ", k.status().message()));
  }
  const uint32_t group = encoding.k_group_tokens() == 0
                             ? std::min<uint32_t>(16, layout.tokens_per_block)
                             : encoding.k_group_tokens();
  if (group < 1 || group > layout.tokens_per_block) {
    return absl::InvalidArgumentError(absl::StrCat("encoding.k_group_tokens ", group,
                                                   " must be in [1, ", layout.tokens_per_block,
                                                   "] (layout.tokens_per_block)"));
  }
  return absl::StrCat(kFp8, "/", engine_layout, "/g", group);
}

absl::StatusOr<std::shared_ptr<BlockTransform>> TransformFor(const NamespaceSpec& spec) {
  if (spec.encoding.empty()) return std::shared_ptr<BlockTransform>();
  const std::vector<std::string> parts = absl::StrSplit(spec.encoding, '/');
  uint32_t group = 0;
  if (parts.size() != 3 || parts[0] != kFp8 || parts[2].size() < 2 || parts[2][0] != 'g' ||
      !absl::SimpleAtoi(parts[2].substr(1), &group)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown storage encoding '", spec.encoding, "'"));
  }
  ASSIGN_OR_RETURN(EngineLayoutKind kind, ParseEngineLayoutKind(parts[1]));
  ASSIGN_OR_RETURN(KvDtype dtype, CodecDtype(spec.layout.dtype));
  const KvLayout& l = spec.layout;
  const KvShape shape{static_cast<int>(l.num_layers),       1,
                      static_cast<int>(l.tokens_per_block), static_cast<int>(l.num_kv_heads),
                      static_cast<int>(l.head_dim),         KvDtypeBytes(dtype)};
  ASSIGN_OR_RETURN(std::unique_ptr<Fp8BlockTransform> t,
                   Fp8BlockTransform::Create(kind, shape, dtype, static_cast<int>(group)));
  return std::shared_ptr<BlockTransform>(std::move(t));
}

std::shared_ptr<BlockTransform> NamespaceTransforms::Set(
    const NamespaceId& ns, std::shared_ptr<BlockTransform> transform) {
  MutexLock lock(&mu_);
  auto [it, inserted] = transforms_.try_emplace(ns, std::move(transform));
  return it->second;
}

void NamespaceTransforms::Remove(const NamespaceId& ns) {
  MutexLock lock(&mu_);
  transforms_.erase(ns);
}

std::shared_ptr<BlockTransform> NamespaceTransforms::Find(const NamespaceId& ns) const {
  MutexLock lock(&mu_);
  auto it = transforms_.find(ns);
  return it == transforms_.end() ? nullptr : it->second;
}

}  // namespace kvtier
