// Fp8BlockTransform: the fp8 (e4m3) storage encoding of a namespace as a
// BlockTransform, over the CPU reference codec (encoding/fp8_codec.h). A plain
// block is one engine block in the block format of `kind` for the
// namespace's layout; the stored block is its fp8 encoding (a little over
// half the bytes of bf16). Counts blocks, values and clipped values.
//
// Thread-safety: thread-safe (stateless codec, atomic counters).
#ifndef KVTIER_ENCODING_FP8_BLOCK_TRANSFORM_H_
#define KVTIER_ENCODING_FP8_BLOCK_TRANSFORM_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "datapath/engine_layout.h"
#include "encoding/block_transform.h"
#include "encoding/fp8_codec.h"

namespace kvtier {

class Fp8BlockTransform final : public BlockTransform {
 public:
  // INVALID_ARGUMENT when the layout cannot be encoded (an fp8 or unknown
  // dtype, a group outside [1, tokens]).
  static absl::StatusOr<std::unique_ptr<Fp8BlockTransform>> Create(EngineLayoutKind kind,
                                                                   const KvShape& shape,
                                                                   KvDtype dtype, int group);

  std::string Describe() const override;
  uint64_t plain_bytes() const override { return layout_.block_bytes(); }
  uint64_t stored_bytes() const override { return encoded_bytes_; }
  absl::Status Encode(absl::Span<const uint8_t> plain, absl::Span<uint8_t> stored) override;
  absl::Status Decode(absl::Span<const uint8_t> stored, absl::Span<uint8_t> plain) override;
  Stats stats() const override;

 private:
  Fp8BlockTransform(EngineLayout layout, Fp8Format format, uint64_t encoded_bytes)
      : layout_(std::move(layout)), format_(format), encoded_bytes_(encoded_bytes) {}

  const EngineLayout layout_;
  const Fp8Format format_;
  const uint64_t encoded_bytes_;
  std::atomic<uint64_t> blocks_{0}, values_{0}, clipped_{0};
};

}  // namespace kvtier

#endif  // KVTIER_ENCODING_FP8_BLOCK_TRANSFORM_H_
