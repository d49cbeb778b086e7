#include "encoding/fp8_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "encoding/fp8_e4m3.h"

namespace kvtier {
namespace {

// e4m3fn value of a code, from the format's definition (ldexp, not bits).
double E4m3Value(uint8_t code) {
  const int e = (code >> 3) & 0xf, m = code & 7;
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (code & 0x80) ? -v : v;
}

// Nearest e4m3 by search over all finite codes, ties to the even code.
uint8_t NearestE4m3(float x) {
  const double a = std::fabs(static_cast<double>(x));
  uint8_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7e; ++c) {
    const double err = std::fabs(E4m3Value(static_cast<uint8_t>(c)) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = static_cast<uint8_t>(c);
      best_err = err;
    }
  }
  return std::signbit(x) ? best | 0x80 : best;
}

TEST(Fp8ScalarTest, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const float f = fp8::E4m3ToFloat(code);
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(f), E4m3Value(code)) << c;
    bool clipped = true;
    EXPECT_EQ(fp8::FloatToE4m3(f, &clipped), code) << c;
    EXPECT_FALSE(clipped);
  }
}

TEST(Fp8ScalarTest, RoundsToNearestEvenLikeABruteForceSearch) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-12.0f, 9.2f);  // log2 range incl. subnormals
  for (int i = 0; i < 200000; ++i) {
    float x = std::exp2(mag(rng));
    if (rng() & 1) x = -x;
    if (std::fabs(x) > 464.0f) continue;
    bool clipped;
    ASSERT_EQ(fp8::FloatToE4m3(x, &clipped), NearestE4m3(x)) << x;
    ASSERT_FALSE(clipped);
  }
  // Ties, by hand: 1.0625 is halfway between 1 (m=0) and 1.125 (m=1): even, 1.
  bool clipped;
  EXPECT_EQ(fp8::FloatToE4m3(1.0625f, &clipped), 0x38);
  EXPECT_EQ(fp8::FloatToE4m3(1.1875f, &clipped), 0x3a);                // 1.125|1.25 -> 1.25
  EXPECT_EQ(fp8::FloatToE4m3(std::ldexp(1.0f, -10), &clipped), 0x00);  // half of 2^-9
  EXPECT_EQ(fp8::FloatToE4m3(std::ldexp(3.0f, -10), &clipped), 0x02);  // 1.5 * 2^-9 -> 2
  EXPECT_EQ(fp8::FloatToE4m3(464.0f, &clipped), 0x7e);
  EXPECT_FALSE(clipped);
}

TEST(Fp8ScalarTest, SaturatesAndCountsWhatDoesNotFit) {
  bool clipped = false;
  EXPECT_EQ(fp8::FloatToE4m3(464.5f, &clipped), 0x7e);
  EXPECT_TRUE(clipped);
  EXPECT_EQ(fp8::FloatToE4m3(-1e9f, &clipped), 0xfe);
  EXPECT_TRUE(clipped);
  EXPECT_EQ(fp8::FloatToE4m3(std::numeric_limits<float>::infinity(), &clipped), 0x7e);
  EXPECT_TRUE(clipped);
  EXPECT_EQ(fp8::FloatToE4m3(std::nanf(""), &clipped) & 0x7f, 0x7f);
  EXPECT_TRUE(clipped);
}

// The compiler's IEEE half type: _Float16, which clang supports on x86 only
// from version 15; its storage-only __fp16 converts the same way.
#if defined(__clang__) && __clang_major__ < 15
using CompilerHalf = __fp16;
#else
using CompilerHalf = _Float16;
#endif

TEST(Fp8ScalarTest, HalfPrecisionConversionsMatchTheCompiler) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mag(-30.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) {
    float x = std::exp2(mag(rng));
    if (rng() & 1) x = -x;
    const CompilerHalf h = static_cast<CompilerHalf>(x);  // the compiler's IEEE rounding
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(fp8::FloatToFp16(x), want) << x;
    ASSERT_EQ(fp8::Fp16ToFloat(want), static_cast<float>(h)) << x;
  }
  // bf16: the nearest of the two neighbours, ties to even.
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng()) & 0xbf7fffffu;  // finite
    float x;
    std::memcpy(&x, &bits, 4);
    const uint16_t lo = static_cast<uint16_t>(bits >> 16), hi = lo + 1;
    const double dlo = std::fabs(double(fp8::Bf16ToFloat(lo)) - x);
    const double dhi = std::fabs(double(fp8::Bf16ToFloat(hi)) - x);
    const uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
    ASSERT_EQ(fp8::FloatToBf16(x), want) << x;
  }
}

// A plain bf16 block of `layout` filled from f(l, kv, t, c).
template <typename F>
std::vector<uint8_t> MakeBlock(const EngineLayout& layout, F f) {
  std::vector<uint8_t> block(layout.block_bytes());
  const KvShape& s = layout.shape();
  for (int l = 0; l < s.num_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const TileView tile = layout.Tile(l, kv);
      for (int t = 0; t < s.block_tokens; ++t) {
        for (int c = 0; c < s.kv_heads * s.head_dim; ++c) {
          const uint64_t i = tile.offset + t * tile.token_stride +
                             (c / s.head_dim) * tile.head_stride + c % s.head_dim;
          const uint16_t h = fp8::FloatToBf16(f(l, kv, t, c));
          std::memcpy(block.data() + 2 * i, &h, 2);
        }
      }
    }
  }
  return block;
}

float BlockValue(const EngineLayout& layout, const std::vector<uint8_t>& block, int l, int kv,
                 int t, int c) {
  const TileView tile = layout.Tile(l, kv);
  const int hd = layout.shape().head_dim;
  const uint64_t i = tile.offset + t * tile.token_stride + (c / hd) * tile.head_stride + c % hd;
  uint16_t h;
  std::memcpy(&h, block.data() + 2 * i, 2);
  return fp8::Bf16ToFloat(h);
}

float Wave(int l, int kv, int t, int c) {
  return std::sin(0.37f * c + 1.3f * t + 0.11f * l) * (kv ? 2.0f : 0.5f) * (1 + (c % 7));
}

TEST(Fp8CodecTest, RoundTripIsWithinFp8PrecisionAndHalvesTheBytes) {
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {2, 4, 16, 2, 64, 2});
  ASSERT_TRUE(layout.ok());
  const Fp8Format format{KvDtype::kBf16, 16, 0};
  absl::StatusOr<fp8::Geometry> geo = MakeFp8Geometry(*layout, format);
  ASSERT_TRUE(geo.ok()) << geo.status();
  // Codes (1 byte per value) + one scale per channel per group (K) and per
  // token (V): a bit over half of bf16.
  const uint64_t values = 2ull * 2 * 16 * 128;
  EXPECT_EQ(geo->encoded_bytes, 16 + values + 4 * 2 * (128 + 16));
  // bf16 is 2 bytes a value; here 1 + 4/16 (a K scale per channel per 16
  // tokens) + 4/128 (a V scale per 128-value token), over 2, over 2: 0.571.
  EXPECT_LT(double(geo->encoded_bytes) / layout->block_bytes(), 0.572);

  const std::vector<uint8_t> block = MakeBlock(*layout, Wave);
  std::vector<uint8_t> encoded(geo->encoded_bytes), decoded(layout->block_bytes());
  absl::StatusOr<Fp8Stats> stats = EncodeFp8Block(*layout, format, block, absl::MakeSpan(encoded));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->values, values);
  EXPECT_EQ(stats->clipped, 0u);
  absl::StatusOr<Fp8Format> found = DecodeFp8Block(*layout, encoded, absl::MakeSpan(decoded));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->valid_tokens, 16);
  for (int l = 0; l < 2; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int t = 0; t < 16; ++t) {
        for (int c = 0; c < 128; ++c) {
          // The scale this value was coded with, recomputed from its group:
          // V over the token's channels, K over the channel's 16 tokens.
          float amax = 0;
          for (int i = 0; i < (kv ? 128 : 16); ++i) {
            amax = std::max(amax, std::fabs(kv ? BlockValue(*layout, block, l, kv, t, i)
                                               : BlockValue(*layout, block, l, kv, i, c)));
          }
          const float scale = amax / 448.0f;
          const float x = BlockValue(*layout, block, l, kv, t, c);
          const float y = BlockValue(*layout, decoded, l, kv, t, c);
          // e4m3 keeps 3 mantissa bits (relative error <= 2^-4); subnormals
          // step 2^-9 of the scale (error <= 2^-10); bf16 output adds 2^-8.
          const float bound = std::fabs(x) * (0.0625f + 0.0040f) + scale * 0.001f;
          ASSERT_LE(std::fabs(x - y), bound) << "l" << l << " kv" << kv << " t" << t << " c" << c;
        }
      }
    }
  }
}

TEST(Fp8CodecTest, PerChannelKScalesProtectSmallChannelsFromOutliers) {
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {1, 1, 16, 1, 16, 2});
  ASSERT_TRUE(layout.ok());
  // Channel 0 is an outlier (1000x); channel 5 holds small values.
  auto f = [](int, int, int t, int c) {
    return c == 0 ? 1000.0f : 0.001f * (1 + t) * (c == 5 ? 1 : 2);
  };
  const std::vector<uint8_t> block = MakeBlock(*layout, f);
  const Fp8Format format{KvDtype::kBf16, 16, 0};
  std::vector<uint8_t> encoded(MakeFp8Geometry(*layout, format)->encoded_bytes),
      decoded(block.size());
  ASSERT_TRUE(EncodeFp8Block(*layout, format, block, absl::MakeSpan(encoded)).ok());
  ASSERT_TRUE(DecodeFp8Block(*layout, encoded, absl::MakeSpan(decoded)).ok());
  double v_error = 0;
  for (int t = 0; t < 16; ++t) {
    const float x = BlockValue(*layout, block, 0, 0, t, 5);
    const float y = BlockValue(*layout, decoded, 0, 0, t, 5);
    EXPECT_LE(std::fabs(x - y), std::fabs(x) * 0.07f) << t;  // K: kept despite channel 0
    const float vx = BlockValue(*layout, block, 0, 1, t, 5);
    v_error += std::fabs(vx - BlockValue(*layout, decoded, 0, 1, t, 5)) / std::fabs(vx) / 16;
  }
  // V has a per-token scale: its small channels lose to the outlier.
  EXPECT_GT(v_error, 0.2);
}

TEST(Fp8CodecTest, PartialGroupStaysInTheOriginalDtypeAndTheRestIsZero) {
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmHnd, {2, 1, 16, 2, 8, 2});
  ASSERT_TRUE(layout.ok());
  // 13 valid tokens, groups of 4: K tokens 0-11 coded, token 12 raw.
  const Fp8Format format{KvDtype::kBf16, 4, 13};
  const std::vector<uint8_t> block = MakeBlock(*layout, Wave);
  absl::StatusOr<fp8::Geometry> geo = MakeFp8Geometry(*layout, format);
  ASSERT_TRUE(geo.ok());
  EXPECT_EQ(geo->k_coded_tokens(), 12u);
  EXPECT_EQ(geo->k_raw_tokens(), 1u);
  std::vector<uint8_t> encoded(geo->encoded_bytes), decoded(block.size(), 0xee);
  ASSERT_TRUE(EncodeFp8Block(*layout, format, block, absl::MakeSpan(encoded)).ok());
  ASSERT_TRUE(DecodeFp8Block(*layout, encoded, absl::MakeSpan(decoded)).ok());
  for (int l = 0; l < 2; ++l) {
    for (int c = 0; c < 16; ++c) {
      // Bit-exact: the raw token is copied, not quantized.
      EXPECT_EQ(BlockValue(*layout, decoded, l, 0, 12, c), BlockValue(*layout, block, l, 0, 12, c));
      for (int kv = 0; kv < 2; ++kv) {
        for (int t = 13; t < 16; ++t) EXPECT_EQ(BlockValue(*layout, decoded, l, kv, t, c), 0.0f);
      }
    }
  }
}

TEST(Fp8CodecTest, EncodingIsTheSameWhateverTheEngineLayout) {
  std::vector<std::vector<uint8_t>> encodings;
  for (EngineLayoutKind kind :
       {EngineLayoutKind::kVllmNhd, EngineLayoutKind::kVllmHnd, EngineLayoutKind::kCrossLayer,
        EngineLayoutKind::kSglangPageFirst}) {
    absl::StatusOr<EngineLayout> layout = EngineLayout::Create(kind, {3, 2, 8, 2, 4, 2});
    ASSERT_TRUE(layout.ok());
    const Fp8Format format{KvDtype::kBf16, 4, 0};
    std::vector<uint8_t> encoded(MakeFp8Geometry(*layout, format)->encoded_bytes);
    ASSERT_TRUE(
        EncodeFp8Block(*layout, format, MakeBlock(*layout, Wave), absl::MakeSpan(encoded)).ok());
    encodings.push_back(encoded);
  }
  for (size_t i = 1; i < encodings.size(); ++i) EXPECT_EQ(encodings[i], encodings[0]) << i;
}

TEST(Fp8CodecTest, NonFiniteValuesAreCountedAsClipped) {
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {1, 1, 4, 1, 4, 4});
  ASSERT_TRUE(layout.ok());
  std::vector<float> values(layout->block_bytes() / 4, 1.0f);
  values[3] = std::numeric_limits<float>::infinity();  // K
  values[20] = std::nanf("");                          // V
  std::vector<uint8_t> block(layout->block_bytes());
  std::memcpy(block.data(), values.data(), block.size());
  const Fp8Format format{KvDtype::kF32, 4, 0};
  std::vector<uint8_t> encoded(MakeFp8Geometry(*layout, format)->encoded_bytes);
  absl::StatusOr<Fp8Stats> stats = EncodeFp8Block(*layout, format, block, absl::MakeSpan(encoded));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->clipped, 2u);
  EXPECT_EQ(stats->values, 32u);
  // The finite values beside them keep their scale (amax ignores them).
  std::vector<uint8_t> decoded(block.size());
  ASSERT_TRUE(DecodeFp8Block(*layout, encoded, absl::MakeSpan(decoded)).ok());
  float v[32];
  std::memcpy(v, decoded.data(), sizeof v);
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_FLOAT_EQ(v[21], 1.0f);
  // A NaN stays a NaN (of its sign), and not by float arithmetic, which
  // would differ between CPU and GPU.
  EXPECT_TRUE(std::isnan(v[20]));
  bool clipped = false;
  EXPECT_EQ(fp8::Quantize(-std::nanf(""), 1.0f, &clipped), 0xff);
  EXPECT_TRUE(clipped);
  uint32_t bits;
  const float neg_nan = fp8::Dequantize(0xff, 3.0f);
  std::memcpy(&bits, &neg_nan, 4);
  EXPECT_EQ(bits, 0xffc00000u);
}

TEST(Fp8CodecTest, BadInputIsRefused) {
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {1, 1, 8, 1, 4, 2});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(MakeFp8Geometry(*layout, {KvDtype::kF32, 4, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);  // 4-byte dtype, 2-byte layout
  EXPECT_EQ(MakeFp8Geometry(*layout, {KvDtype::kBf16, 0, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeFp8Geometry(*layout, {KvDtype::kBf16, 9, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeFp8Geometry(*layout, {KvDtype::kBf16, 4, 9}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const Fp8Format format{KvDtype::kBf16, 4, 0};
  const std::vector<uint8_t> block = MakeBlock(*layout, Wave);
  std::vector<uint8_t> encoded(MakeFp8Geometry(*layout, format)->encoded_bytes);
  std::vector<uint8_t> short_out(encoded.size() - 1);
  EXPECT_EQ(EncodeFp8Block(*layout, format, block, absl::MakeSpan(short_out)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(EncodeFp8Block(*layout, format, block, absl::MakeSpan(encoded)).ok());
  std::vector<uint8_t> decoded(block.size());
  std::vector<uint8_t> truncated(encoded.begin(), encoded.end() - 1);
  EXPECT_EQ(DecodeFp8Block(*layout, truncated, absl::MakeSpan(decoded)).status().code(),
            absl::StatusCode::kDataLoss);
  std::vector<uint8_t> bad_magic = encoded;
  bad_magic[0] ^= 1;
  EXPECT_EQ(DecodeFp8Block(*layout, bad_magic, absl::MakeSpan(decoded)).status().code(),
            absl::StatusCode::kDataLoss);
  absl::StatusOr<EngineLayout> other =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {2, 1, 8, 1, 4, 2});
  ASSERT_TRUE(other.ok());
  std::vector<uint8_t> other_block(other->block_bytes());
  EXPECT_EQ(DecodeFp8Block(*other, encoded, absl::MakeSpan(other_block)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseKvDtype("int8").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvtier
