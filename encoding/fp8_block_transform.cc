#include "encoding/fp8_block_transform.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<Fp8BlockTransform>> Fp8BlockTransform::Create(EngineLayoutKind kind,
                                                                             const KvShape& shape,
                                                                             KvDtype dtype,
                                                                             int group) {
  ASSIGN_OR_RETURN(EngineLayout layout, EngineLayout::Create(kind, shape));
  const Fp8Format format{dtype, group, 0};
  ASSIGN_OR_RETURN(fp8::Geometry geo, MakeFp8Geometry(layout, format));
  return std::unique_ptr<Fp8BlockTransform>(
      new Fp8BlockTransform(std::move(layout), format, geo.encoded_bytes));
}

std::string Fp8BlockTransform::Describe() const {
  return absl::StrCat("fp8-e4m3 (", EngineLayoutKindName(layout_.kind()), " ",
                      KvDtypeName(format_.dtype), " blocks, K scales per ", format_.k_group_tokens,
                      " tokens, V per token)");
}

absl::Status Fp8BlockTransform::Encode(absl::Span<const uint8_t> plain,
                                       absl::Span<uint8_t> stored) {
  ASSIGN_OR_RETURN(Fp8Stats s, EncodeFp8Block(layout_, format_, plain, stored));
  blocks_.fetch_add(1, std::memory_order_relaxed);
  values_.fetch_add(s.values, std::memory_order_relaxed);
  clipped_.fetch_add(s.clipped, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Fp8BlockTransform::Decode(absl::Span<const uint8_t> stored,
                                       absl::Span<uint8_t> plain) {
  ASSIGN_OR_RETURN(Fp8Format f, DecodeFp8Block(layout_, stored, plain));
  if (f.dtype != format_.dtype || f.k_group_tokens != format_.k_group_tokens) {
    return absl::DataLossError("the stored block was encoded with another dtype or K group");
  }
  return absl::OkStatus();
}

BlockTransform::Stats Fp8BlockTransform::stats() const {
  return {blocks_.load(std::memory_order_relaxed), values_.load(std::memory_order_relaxed),
          clipped_.load(std::memory_order_relaxed)};
}

}  // namespace kvtier
