// Scalar conversions shared, as the same source, by the CPU reference codec
// (encoding/fp8_codec.cc) and the CUDA kernels (gpu/cuda/*.cu), so that both give
// the same bits: float <-> fp8 e4m3 (OCP "e4m3fn": no infinities, 0x7f/0xff
// are NaN, largest finite 448), float <-> bf16 and float <-> fp16, all
// rounding to nearest, ties to even. Only integer operations, float compares
// and exact multiplications by powers of two are used.
//
// Thread-safety: pure functions.
#ifndef KVTIER_ENCODING_FP8_E4M3_H_
#define KVTIER_ENCODING_FP8_E4M3_H_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVTIER_HD __host__ __device__ inline
#else
#define KVTIER_HD inline
#endif

namespace kvtier::fp8 {

inline constexpr float kE4m3Max = 448.0f;

KVTIER_HD uint32_t FloatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
KVTIER_HD float BitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds the 23-bit mantissa `m` right by `shift` bits, ties to even.
KVTIER_HD uint32_t RoundShift(uint32_t m, int shift) {
  const uint32_t kept = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

// float -> e4m3 with saturation. *clipped is set when x is not finite or
// lies beyond the range that rounds to a finite e4m3 (|x| > 464; 464 is
// the tie between 448 and the missing 480, which goes to even, 448).
KVTIER_HD uint8_t FloatToE4m3(float x, bool* clipped) {
  const uint32_t bits = FloatBits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t mag = bits & 0x7fffffffu;
  *clipped = false;
  if (mag > 0x7f800000u) {  // NaN
    *clipped = true;
    return sign | 0x7f;
  }
  if (mag > 0x43e80000u) {  // > 464 (or inf): saturate
    *clipped = true;
    return sign | 0x7e;
  }
  if (mag >= 0x43e00000u) return sign | 0x7e;  // [448, 464] rounds to 448
  const int exp = static_cast<int>(mag >> 23) - 127;
  if (exp < -6) {
    // Subnormal e4m3: multiples of 2^-9. Add the mantissa's hidden bit and
    // shift so the unit is 2^-9: value = (1.m) * 2^exp = q * 2^-9.
    if (exp < -10) return sign;  // below half the smallest subnormal
    const uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    const uint32_t q = RoundShift(m, 23 - (exp + 9));  // q in [0, 8]
    return sign | static_cast<uint8_t>(q);             // q == 8 is 2^-6, code 0x08
  }
  uint32_t r = RoundShift(mag & 0x7fffffu, 20);
  int e = exp;
  if (r == 8) {
    r = 0;
    ++e;
  }
  return sign | static_cast<uint8_t>(((e + 7) << 3) | r);
}

KVTIER_HD float E4m3ToFloat(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
  const uint32_t e = (code >> 3) & 0xf;
  const uint32_t m = code & 0x7;
  if (e == 0xf && m == 0x7) return BitsFloat(sign | 0x7fc00000u);
  if (e == 0) {
    // m * 2^-9, exact.
    return BitsFloat(sign | FloatBits(static_cast<float>(m) * 0.001953125f));
  }
  return BitsFloat(sign | ((e - 7 + 127) << 23) | (m << 20));
}

KVTIER_HD float Bf16ToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

KVTIER_HD uint16_t FloatToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

KVTIER_HD float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t e = (h >> 10) & 0x1f;
  const uint32_t m = h & 0x3ff;
  if (e == 0x1f) return BitsFloat(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    // m * 2^-24, exact.
    return BitsFloat(sign | FloatBits(static_cast<float>(m) * 5.9604644775390625e-8f));
  }
  return BitsFloat(sign | ((e - 15 + 127) << 23) | (m << 13));
}

KVTIER_HD uint16_t FloatToFp16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (mag >= 0x477ff000u) return sign | 0x7c00;  // rounds past 65504: inf
  const int exp = static_cast<int>(mag >> 23) - 127;
  if (exp < -14) {
    if (exp < -25) return sign;
    const uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    return sign | static_cast<uint16_t>(RoundShift(m, 23 - (exp + 24)));
  }
  uint32_t r = RoundShift(mag & 0x7fffffu, 13);
  int e = exp;
  if (r == 0x400) {
    r = 0;
    ++e;
  }
  return sign | static_cast<uint16_t>(((e + 15) << 10) | r);
}

}  // namespace kvtier::fp8

#endif  // KVTIER_ENCODING_FP8_E4M3_H_
