// 16-bit floating types (IEEE half, bfloat16) with round-to-nearest-even conversion.
// Host/device header: the CPU kernels and the CUDA kernels round identically.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/macros.h"

namespace tessera {

TS_HOST_DEVICE TS_INLINE uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

TS_HOST_DEVICE TS_INLINE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// bf16 keeps the top 16 bits of an f32; rounding adds 0x7FFF plus the lowest kept bit (ties to even).
TS_HOST_DEVICE TS_INLINE uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

TS_HOST_DEVICE TS_INLINE float bf16_bits_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Handles subnormals, inf, NaN.
TS_HOST_DEVICE TS_INLINE uint16_t float_to_half_bits(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return uint16_t(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                                   // below 2^-14: subnormal half or zero
    if (abs < 0x33000000u) return uint16_t(sign);            // below 2^-25 rounds to zero
    uint32_t mant = (abs & 0x007FFFFFu) | 0x00800000u;
    uint32_t shift = 126u - (abs >> 23);  // value in units of 2^-24 is mant >> shift, 14 <= shift <= 24
    uint32_t result = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (result & 1u))) result += 1;  // may carry into the exponent
    return uint16_t(sign | result);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xFFFu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

TS_HOST_DEVICE TS_INLINE float half_bits_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    float m = float(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -m : m;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  TS_HOST_DEVICE BFloat16(float f) : bits(float_to_bf16_bits(f)) {}
  TS_HOST_DEVICE operator float() const { return bf16_bits_to_float(bits); }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  TS_HOST_DEVICE Half(float f) : bits(float_to_half_bits(f)) {}
  TS_HOST_DEVICE operator float() const { return half_bits_to_float(bits); }
};

}  // namespace tessera
