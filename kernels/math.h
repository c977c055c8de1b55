// Per-element math shared by the CPU loops and the CUDA kernels (host/device), so CPU tests pin
// down what the GPU computes. Everything is f32. exp/tanh/sigmoid/GELU(tanh)/SiLU use only
// arithmetic and bit casts (no libm calls), so the CPU loops over them vectorise.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/half.h"
#include "core/macros.h"

// Host compilers must inline these into the element-wise loops or the loops cannot vectorise;
// GCC's inline heuristics alone give up on tanh's size.
#if defined(__CUDACC__)
#define TS_MATH_FN TS_HOST_DEVICE TS_INLINE
#else
#define TS_MATH_FN inline __attribute__((always_inline))
#endif

namespace tessera::kernels::math {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2Hi = 0.693359375f;  // few mantissa bits: n * kLn2Hi is exact
inline constexpr float kLn2Lo = -2.12194440054690583e-4f;
inline constexpr float kSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCoef = 0.044715f;
inline constexpr float kInvSqrt2 = 0.7071067811865476f;
inline constexpr float kInvSqrt2Pi = 0.3989422804014327f;

// c ? a : b without a branch. GCC will not if-convert a float comparison feeding a ternary under
// the default -ftrapping-math, which stops loops from vectorising; a bit blend has no such issue.
TS_MATH_FN float select(bool c, float a, float b) {
#if defined(__CUDA_ARCH__)
  return c ? a : b;
#else
  const uint32_t m = 0u - uint32_t(c);
  return bits_float((float_bits(a) & m) | (float_bits(b) & ~m));
#endif
}

TS_MATH_FN float abs(float x) { return bits_float(float_bits(x) & 0x7FFFFFFFu); }

// e^x within ~2 ulp over the whole f32 range (subnormal results, overflow to inf, NaN kept).
// x = n ln2 + r with |r| <= ln2/2; e^r from its degree-7 Taylor polynomial (truncation < 6e-9).
TS_MATH_FN float exp(float x) {
  x = select(x > 89.0f, 89.0f, x);  // e^89 overflows to inf anyway; NaN compares false and stays
  x = select(x < -104.0f, -104.0f, x);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  const int32_t ni = int32_t(float_bits(t) - float_bits(kRound));  // n as an integer
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n in two factors, so n in [-150, 128] (subnormal results, 2^128 * p < FLT_MAX) works.
  const int32_t n1 = ni / 2, n2 = ni - n1;
  const float s1 = bits_float(uint32_t(n1 + 127) << 23);
  const float s2 = bits_float(uint32_t(n2 + 127) << 23);
  return p * s1 * s2;
}

TS_MATH_FN float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

// Odd Taylor series below 0.55 (where 1 - 2/(e^2x + 1) would cancel), the exp form above.
TS_MATH_FN float tanh(float x) {
  const float a = abs(x);
  const float x2 = x * x;
  float p = 6404582.0f / 10854718875.0f;
  p = p * x2 - 929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  const float small = x + x * x2 * p;
  const float big = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  const float signed_big = bits_float(float_bits(big) | (float_bits(x) & 0x80000000u));
  return select(a < 0.55f, small, signed_big);
}

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(u)) == x * sigmoid(2u), which stays accurate
// for negative x where 1 + tanh(u) would cancel.
TS_MATH_FN float gelu_tanh(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoef * x * x * x);
  return x / (1.0f + exp(-2.0f * u));
}

// d/dx [x s(2u)] = s + x s (1 - s) 2u'. e is clamped so that e * s stays finite (it tends to 1).
TS_MATH_FN float gelu_tanh_grad(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoef * x * x * x);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * x * x);
  const float m = -2.0f * u;
  const float e = exp(select(m < 80.0f, m, 80.0f));
  const float s = 1.0f / (1.0f + e);
  return s + x * s * (e * s) * 2.0f * du;
}

// Exact GELU: x Phi(x) = 0.5 x erfc(-x / sqrt 2) (erfc keeps the negative tail accurate).
TS_MATH_FN float gelu_erf(float x) { return 0.5f * x * ::erfcf(-x * kInvSqrt2); }

TS_MATH_FN float gelu_erf_grad(float x) {
  return 0.5f * ::erfcf(-x * kInvSqrt2) + x * kInvSqrt2Pi * exp(-0.5f * x * x);
}

TS_MATH_FN float silu(float x) { return x / (1.0f + exp(-x)); }

// d/dx [x s(x)] = s (1 + x (1 - s)), with 1 - s = e s.
TS_MATH_FN float silu_grad(float x) {
  const float m = -x;
  const float e = exp(select(m < 80.0f, m, 80.0f));
  const float s = 1.0f / (1.0f + e);
  return s * (1.0f + x * (e * s));
}

}  // namespace tessera::kernels::math
