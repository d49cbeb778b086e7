// Fp8Geometry: where everything lies in a block encoded as fp8 e4m3, and in
// the block it encodes. One plain struct, computed on the host from a
// EngineLayout (encoding/fp8_codec.h) and read by both the CPU reference codec and the
// CUDA kernels, so the two cannot disagree about offsets.
//
// Encoded block, all offsets in bytes from its start:
//   header (16 bytes): magic "KVF8", u16 version, u8 dtype, u8 0,
//                      u32 valid tokens n, u32 K group tokens G
//   scales (f32):  per layer, K's scales [n/G groups][C channels] then V's
//                  scales [n tokens]
//   raw K tail:    per layer, K tokens [G*(n/G), n) in the original dtype
//   codes (e4m3):  per layer, K [G*(n/G) tokens][C] then V [n tokens][C]
// where C = heads * head_dim and token/channel order is [t][h][d].
// Decoding writes tokens [0, n) of every tile and zeroes the rest.
//
// Thread-safety: a plain value.
#ifndef KVTIER_ENCODING_FP8_GEOMETRY_H_
#define KVTIER_ENCODING_FP8_GEOMETRY_H_

#include <cstdint>

#include "encoding/fp8_e4m3.h"

namespace kvtier::fp8 {

inline constexpr uint32_t kMagic = 0x3846564b;  // "KVF8" little-endian
inline constexpr uint16_t kVersion = 1;
inline constexpr uint64_t kHeaderBytes = 16;

// Matches KvDtype in fp8_codec.h.
enum Dtype : uint8_t { kBf16 = 0, kFp16 = 1, kF32 = 2 };

struct Geometry {
  // Shape.
  uint32_t layers, tokens, heads, head_dim, channels;  // channels = heads*head_dim
  uint32_t valid, group, full_groups;                  // n, G, n / G
  uint8_t dtype;
  uint32_t elem_bytes;
  // Tile (layer l, kv) of the plain block starts at element
  // tile_base[kv] + l * tile_layer_stride; element (t, h, d) of it is at
  // + t * token_stride + h * head_stride + d.
  uint64_t tile_base[2], tile_layer_stride, token_stride, head_stride;
  uint64_t block_elements;  // of the plain block
  // Encoded sections.
  uint64_t scales_at, raw_at, codes_at, encoded_bytes;

  KVTIER_HD uint32_t k_coded_tokens() const { return full_groups * group; }
  KVTIER_HD uint32_t k_raw_tokens() const { return valid - k_coded_tokens(); }
  // Scales per layer: K's then V's.
  KVTIER_HD uint64_t k_scales() const { return uint64_t(full_groups) * channels; }
  KVTIER_HD uint64_t layer_scales() const { return k_scales() + valid; }
  KVTIER_HD uint64_t scale_offset(uint32_t l, int kv) const {
    return scales_at + 4 * (l * layer_scales() + (kv ? k_scales() : 0));
  }
  KVTIER_HD uint64_t raw_offset(uint32_t l) const {
    return raw_at + uint64_t(elem_bytes) * l * k_raw_tokens() * channels;
  }
  KVTIER_HD uint64_t k_codes() const { return uint64_t(k_coded_tokens()) * channels; }
  KVTIER_HD uint64_t layer_codes() const { return k_codes() + uint64_t(valid) * channels; }
  KVTIER_HD uint64_t code_offset(uint32_t l, int kv) const {
    return codes_at + l * layer_codes() + (kv ? k_codes() : 0);
  }
  // Element index in the plain block of (layer, kv, token, channel).
  KVTIER_HD uint64_t element(uint32_t l, int kv, uint32_t t, uint32_t c) const {
    return tile_base[kv] + l * tile_layer_stride + t * token_stride + (c / head_dim) * head_stride +
           (c % head_dim);
  }
};

// Reads element `i` of a plain block as float.
KVTIER_HD float LoadElement(const uint8_t* block, const Geometry& g, uint64_t i) {
  if (g.dtype == kF32) {
    float f;
    memcpy(&f, block + 4 * i, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, block + 2 * i, 2);
  return g.dtype == kBf16 ? Bf16ToFloat(h) : Fp16ToFloat(h);
}

KVTIER_HD void StoreElement(uint8_t* block, const Geometry& g, uint64_t i, float f) {
  if (g.dtype == kF32) {
    memcpy(block + 4 * i, &f, 4);
    return;
  }
  const uint16_t h = g.dtype == kBf16 ? FloatToBf16(f) : FloatToFp16(f);
  memcpy(block + 2 * i, &h, 2);
}

KVTIER_HD bool IsFinite(float f) { return (FloatBits(f) & 0x7f800000u) != 0x7f800000u; }

// The scale of values whose largest finite magnitude is `amax`: amax / 448,
// or 1 when there is none (all zeros or non-finite).
KVTIER_HD float ScaleFor(float amax) {
  const float s = amax / kE4m3Max;
  return s > 0.0f && IsFinite(s) ? s : 1.0f;
}

// NaNs are handled with integer operations: float arithmetic on a NaN gives
// the canonical NaN on GPUs but passes the input NaN through on x86, and the
// two codecs must agree to the bit.
KVTIER_HD uint8_t Quantize(float x, float scale, bool* clipped) {
  const uint32_t bits = FloatBits(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    *clipped = true;
    return static_cast<uint8_t>(((bits >> 24) & 0x80) | 0x7f);
  }
  return FloatToE4m3(x / scale, clipped);
}

KVTIER_HD float Dequantize(uint8_t code, float scale) {
  if ((code & 0x7f) == 0x7f)
    return BitsFloat((static_cast<uint32_t>(code & 0x80) << 24) | 0x7fc00000u);
  return E4m3ToFloat(code) * scale;
}

}  // namespace kvtier::fp8

#endif  // KVTIER_ENCODING_FP8_GEOMETRY_H_
