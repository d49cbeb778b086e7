#include "encoding/fp8_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {

absl::StatusOr<KvDtype> ParseKvDtype(absl::string_view name) {
  if (name == "bf16") return KvDtype::kBf16;
  if (name == "fp16") return KvDtype::kFp16;
  if (name == "f32") return KvDtype::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV dtype '", name, "' (bf16, fp16, f32)"));
}

std::string KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBf16:
      return "bf16";
    case KvDtype::kFp16:
      return "fp16";
    case KvDtype::kF32:
      return "f32";
  }
  return "unknown";
}

int KvDtypeBytes(KvDtype dtype) { return dtype == KvDtype::kF32 ? 4 : 2; }

absl::StatusOr<fp8::Geometry> MakeFp8Geometry(const EngineLayout& layout, const Fp8Format& f) {
  const KvShape& s = layout.shape();
  if (KvDtypeBytes(f.dtype) != s.dtype_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", KvDtypeName(f.dtype), " has ", KvDtypeBytes(f.dtype),
                     "-byte elements; the layout has ", s.dtype_bytes));
  }
  if (f.k_group_tokens < 1 || f.k_group_tokens > s.block_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("the K scale group (", f.k_group_tokens,
                                                   " tokens) must be in [1, ", s.block_tokens,
                                                   "], the block's tokens"));
  }
  if (f.valid_tokens < 0 || f.valid_tokens > s.block_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("valid tokens ", f.valid_tokens, " outside [0, ", s.block_tokens, "]"));
  }
  fp8::Geometry g{};
  g.layers = s.num_layers;
  g.tokens = s.block_tokens;
  g.heads = s.kv_heads;
  g.head_dim = s.head_dim;
  g.channels = g.heads * g.head_dim;
  g.valid = f.valid_tokens == 0 ? s.block_tokens : f.valid_tokens;
  g.group = f.k_group_tokens;
  g.full_groups = g.valid / g.group;
  g.dtype = static_cast<uint8_t>(f.dtype);
  g.elem_bytes = s.dtype_bytes;
  const TileView k0 = layout.Tile(0, 0), v0 = layout.Tile(0, 1);
  g.tile_base[0] = k0.offset;
  g.tile_base[1] = v0.offset;
  g.tile_layer_stride = g.layers > 1 ? layout.Tile(1, 0).offset - k0.offset : 0;
  g.token_stride = k0.token_stride;
  g.head_stride = k0.head_stride;
  g.block_elements = layout.block_bytes() / s.dtype_bytes;
  g.scales_at = fp8::kHeaderBytes;
  g.raw_at = g.scales_at + 4 * uint64_t(g.layers) * g.layer_scales();
  g.codes_at = g.raw_at + uint64_t(g.elem_bytes) * g.layers * g.k_raw_tokens() * g.channels;
  g.encoded_bytes = g.codes_at + uint64_t(g.layers) * g.layer_codes();
  return g;
}

absl::StatusOr<Fp8Stats> EncodeFp8Block(const EngineLayout& layout, const Fp8Format& format,
                                        absl::Span<const uint8_t> block, absl::Span<uint8_t> out) {
  ASSIGN_OR_RETURN(fp8::Geometry geo, MakeFp8Geometry(layout, format));
  const fp8::Geometry& g = geo;
  if (block.size() != layout.block_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the block has ", block.size(), " bytes, not ", layout.block_bytes()));
  }
  if (out.size() != g.encoded_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the output has ", out.size(), " bytes, not ", g.encoded_bytes));
  }
  uint8_t* o = out.data();
  const uint8_t* in = block.data();
  std::memset(o, 0, fp8::kHeaderBytes);
  std::memcpy(o, &fp8::kMagic, 4);
  std::memcpy(o + 4, &fp8::kVersion, 2);
  o[6] = g.dtype;
  std::memcpy(o + 8, &g.valid, 4);
  std::memcpy(o + 12, &g.group, 4);

  Fp8Stats stats;
  auto put_scale = [&](uint64_t at, float scale) { std::memcpy(o + at, &scale, 4); };
  std::vector<float> scales(g.channels);
  for (uint32_t l = 0; l < g.layers; ++l) {
    // K: per channel, per full group.
    for (uint32_t grp = 0; grp < g.full_groups; ++grp) {
      for (uint32_t c = 0; c < g.channels; ++c) {
        float amax = 0.0f;
        for (uint32_t t = grp * g.group; t < (grp + 1) * g.group; ++t) {
          const float x = fp8::LoadElement(in, g, g.element(l, 0, t, c));
          if (fp8::IsFinite(x)) amax = std::max(amax, std::fabs(x));
        }
        scales[c] = fp8::ScaleFor(amax);
        put_scale(g.scale_offset(l, 0) + 4 * (uint64_t(grp) * g.channels + c), scales[c]);
      }
      for (uint32_t t = grp * g.group; t < (grp + 1) * g.group; ++t) {
        for (uint32_t c = 0; c < g.channels; ++c) {
          bool clipped;
          o[g.code_offset(l, 0) + uint64_t(t) * g.channels + c] =
              fp8::Quantize(fp8::LoadElement(in, g, g.element(l, 0, t, c)), scales[c], &clipped);
          stats.clipped += clipped;
        }
      }
    }
    stats.values += g.k_codes();
    // K tail in the original dtype.
    for (uint32_t t = g.k_coded_tokens(); t < g.valid; ++t) {
      for (uint32_t c = 0; c < g.channels; ++c) {
        std::memcpy(o + g.raw_offset(l) +
                        g.elem_bytes * ((uint64_t(t) - g.k_coded_tokens()) * g.channels + c),
                    in + g.elem_bytes * g.element(l, 0, t, c), g.elem_bytes);
      }
    }
    // V: per token.
    for (uint32_t t = 0; t < g.valid; ++t) {
      float amax = 0.0f;
      for (uint32_t c = 0; c < g.channels; ++c) {
        const float x = fp8::LoadElement(in, g, g.element(l, 1, t, c));
        if (fp8::IsFinite(x)) amax = std::max(amax, std::fabs(x));
      }
      const float scale = fp8::ScaleFor(amax);
      put_scale(g.scale_offset(l, 1) + 4 * uint64_t(t), scale);
      for (uint32_t c = 0; c < g.channels; ++c) {
        bool clipped;
        o[g.code_offset(l, 1) + uint64_t(t) * g.channels + c] =
            fp8::Quantize(fp8::LoadElement(in, g, g.element(l, 1, t, c)), scale, &clipped);
        stats.clipped += clipped;
      }
    }
    stats.values += uint64_t(g.valid) * g.channels;
  }
  return stats;
}

absl::StatusOr<Fp8Format> DecodeFp8Block(const EngineLayout& layout,
                                         absl::Span<const uint8_t> encoded,
                                         absl::Span<uint8_t> block) {
  if (encoded.size() < fp8::kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("an fp8 block needs a ", fp8::kHeaderBytes,
                                            "-byte header; got ", encoded.size(), " bytes"));
  }
  uint32_t magic, valid, group;
  uint16_t version;
  std::memcpy(&magic, encoded.data(), 4);
  std::memcpy(&version, encoded.data() + 4, 2);
  std::memcpy(&valid, encoded.data() + 8, 4);
  std::memcpy(&group, encoded.data() + 12, 4);
  const uint8_t dtype = encoded[6];
  if (magic != fp8::kMagic || version != fp8::kVersion || dtype > fp8::kF32) {
    return absl::DataLossError("not an fp8 block (bad magic, version or dtype)");
  }
  Fp8Format f;
  f.dtype = static_cast<KvDtype>(dtype);
  f.k_group_tokens = static_cast<int>(std::min<uint32_t>(group, 1u << 30));
  f.valid_tokens = static_cast<int>(std::min<uint32_t>(valid, 1u << 30));
  if (f.valid_tokens == 0) return absl::DataLossError("an fp8 block with 0 tokens");
  absl::StatusOr<fp8::Geometry> geo = MakeFp8Geometry(layout, f);
  if (!geo.ok()) {
    return absl::DataLossError(
        absl::StrCat("fp8 block does not fit the layout: ", geo.status().message()));
  }
  const fp8::Geometry& g = *geo;
  if (encoded.size() != g.encoded_bytes) {
    return absl::DataLossError(
        absl::StrCat("fp8 block of ", encoded.size(), " bytes; its header says ", g.encoded_bytes));
  }
  if (block.size() != layout.block_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the block has ", block.size(), " bytes, not ", layout.block_bytes()));
  }
  const uint8_t* e = encoded.data();
  uint8_t* out = block.data();
  std::memset(out, 0, block.size());
  auto scale_at = [&](uint64_t at) {
    float s;
    std::memcpy(&s, e + at, 4);
    return s;
  };
  for (uint32_t l = 0; l < g.layers; ++l) {
    for (uint32_t t = 0; t < g.k_coded_tokens(); ++t) {
      const uint32_t grp = t / g.group;
      for (uint32_t c = 0; c < g.channels; ++c) {
        const float s = scale_at(g.scale_offset(l, 0) + 4 * (uint64_t(grp) * g.channels + c));
        fp8::StoreElement(
            out, g, g.element(l, 0, t, c),
            fp8::Dequantize(e[g.code_offset(l, 0) + uint64_t(t) * g.channels + c], s));
      }
    }
    for (uint32_t t = g.k_coded_tokens(); t < g.valid; ++t) {
      for (uint32_t c = 0; c < g.channels; ++c) {
        std::memcpy(out + g.elem_bytes * g.element(l, 0, t, c),
                    e + g.raw_offset(l) +
                        g.elem_bytes * ((uint64_t(t) - g.k_coded_tokens()) * g.channels + c),
                    g.elem_bytes);
      }
    }
    for (uint32_t t = 0; t < g.valid; ++t) {
      const float s = scale_at(g.scale_offset(l, 1) + 4 * uint64_t(t));
      for (uint32_t c = 0; c < g.channels; ++c) {
        fp8::StoreElement(
            out, g, g.element(l, 1, t, c),
            fp8::Dequantize(e[g.code_offset(l, 1) + uint64_t(t) * g.channels + c], s));
      }
    }
  }
  return f;
}

}  // namespace kvtier
