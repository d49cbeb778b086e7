// The fp8 (e4m3) storage encoding of KV blocks, CPU reference. A namespace
// that asks for it stores blocks at about half their bf16 size:
//  - V: one f32 scale per token (over that token's heads and dims);
//  - K: one f32 scale per channel per group of G tokens (keys have outlier
//    channels; per-channel scales keep them from flattening the rest);
//  - K tokens past the last full group (a partial block's newest tokens)
//    stay in the original dtype until their group fills.
// Scales are amax / 448, values are x / scale rounded to nearest-even and
// saturated; values that do not fit (non-finite, or beyond 464 after
// scaling) are counted as clipped. The CUDA kernels (gpu/cuda/fp8_kernels.cu)
// must produce the same bytes; the `gpu` tests compare them.
// Layout of an encoded block: encoding/fp8_geometry.h.
//
// Thread-safety: pure functions.
#ifndef KVTIER_ENCODING_FP8_CODEC_H_
#define KVTIER_ENCODING_FP8_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "datapath/engine_layout.h"
#include "encoding/fp8_geometry.h"

namespace kvtier {

enum class KvDtype { kBf16 = fp8::kBf16, kFp16 = fp8::kFp16, kF32 = fp8::kF32 };

absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name);  // bf16, fp16, f32
std::string KvDtypeName(KvDtype dtype);
int KvDtypeBytes(KvDtype dtype);

struct Fp8Format {
  KvDtype dtype = KvDtype::kBf16;
  int k_group_tokens = 16;  // G, in [1, block tokens]
  int valid_tokens = 0;     // n, in [0, block tokens]; 0 means all
};

struct Fp8Stats {
  uint64_t values = 0;   // encoded as fp8
  uint64_t clipped = 0;  // of those, saturated or not finite
};

// INVALID_ARGUMENT when the layout's element size is not the dtype's, or G
// or n are out of range.
absl::StatusOr<fp8::Geometry> MakeFp8Geometry(const EngineLayout& layout, const Fp8Format& format);

// Encodes one plain block (layout.block_bytes()) into `out`, which must hold
// exactly geometry.encoded_bytes.
absl::StatusOr<Fp8Stats> EncodeFp8Block(const EngineLayout& layout, const Fp8Format& format,
                                        absl::Span<const uint8_t> block, absl::Span<uint8_t> out);

// Reads the encoded block's header, checks it against the layout and its
// size, and writes the plain block. DATA_LOSS for a bad magic, version or
// size; the format found is returned.
absl::StatusOr<Fp8Format> DecodeFp8Block(const EngineLayout& layout,
                                         absl::Span<const uint8_t> encoded,
                                         absl::Span<uint8_t> block);

}  // namespace kvtier

#endif  // KVTIER_ENCODING_FP8_CODEC_H_
