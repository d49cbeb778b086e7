#include "encoding/fp8_block_transform.h"

#include "absl/strings/str_cat.h"

namespace kvtier {

absl::StatusOr<std::unique_ptr<Fp8BlockTransform>> Fp8BlockTransform::Create(EngineLayoutKind kind,
                                                                             const KvShape& shape,
                                                                             KvDtype dtype,
                                                                             int group) {
  absl::StatusOr<EngineLayout> layout = EngineLayout::Create(kind, shape);
  if (!layout.ok()) return layout.status();
  const Fp8Format format{dtype, group, 0};
  absl::StatusOr<fp8::Geometry> geo = MakeFp8Geometry(*layout, format);
  if (!geo.ok()) return geo.status();
  return std::unique_ptr<Fp8BlockTransform>(
      new Fp8BlockTransform(*std::move(layout), format, geo->encoded_bytes));
}

std::string Fp8BlockTransform::Describe() const {
  return absl::StrCat("fp8-e4m3 (", EngineLayoutKindName(layout_.kind()), " ",
                      KvDtypeName(format_.dtype), " blocks, K scales per ", format_.k_group_tokens,
                      " tokens, V per token)");
}

absl::Status Fp8BlockTransform::Encode(absl::Span<const uint8_t> plain,
                                       absl::Span<uint8_t> stored) {
  absl::StatusOr<Fp8Stats> s = EncodeFp8Block(layout_, format_, plain, stored);
  if (!s.ok()) return s.status();
  blocks_.fetch_add(1, std::memory_order_relaxed);
  values_.fetch_add(s->values, std::memory_order_relaxed);
  clipped_.fetch_add(s->clipped, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Fp8BlockTransform::Decode(absl::Span<const uint8_t> stored,
                                       absl::Span<uint8_t> plain) {
  absl::StatusOr<Fp8Format> f = DecodeFp8Block(layout_, stored, plain);
  if (!f.ok()) return f.status();
  if (f->dtype != format_.dtype || f->k_group_tokens != format_.k_group_tokens) {
    return absl::DataLossError("the stored block was encoded with another dtype or K group");
  }
  return absl::OkStatus();
}

BlockTransform::Stats Fp8BlockTransform::stats() const {
  return {blocks_.load(std::memory_order_relaxed), values_.load(std::memory_order_relaxed),
          clipped_.load(std::memory_order_relaxed)};
}

}  // namespace kvtier
