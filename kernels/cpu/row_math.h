// Row primitives shared by the CPU softmax, cross-entropy and layer-norm kernels: a vectorisable
// f32 exp, max/sum reductions over a row, row loads/stores between 16-bit types and f32, and the
// contiguous-output plumbing those kernels share.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/factory.h"
#include "core/half.h"
#include "core/tensor.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TS_ROW_MATH_AVX2 1
#endif

namespace tessera::kernels::cpu::detail {

namespace exp_const {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kMin = -87.33654f, kMax = 88.72283f;
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_const

// exp(x) in f32 without a libm call, with an AVX2 twin below (GCC leaves scalar code with clamps
// unvectorised under -ftrapping-math, and glibc's expf is scalar without -ffast-math). Range
// reduction x = n*ln2 + r with |r| <= ln2/2, then a degree-6 polynomial for exp(r) (relative error
// about 1e-7) scaled by 2^n built in the exponent bits. Inputs below about -87.3 return 0
// (exp(-inf) = 0 for masked scores), above 88.7 return +inf, NaN stays NaN.
inline float exp_approx(float x) {
  using namespace exp_const;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float xc = x < kMin ? kMin : (x > kMax ? kMax : x);
  float t = xc * kLog2e + kRound;
  float n = t - kRound;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP[0];
  for (int k = 1; k < 6; ++k) p = p * r + kP[k];
  p = p * (r * r) + (r + 1.0f);
  // 2^n for n in [-126, 128]: n = 128 happens only for clamped large x, so split it in two halves.
  int32_t ni = int32_t(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = std::bit_cast<float>(uint32_t(n1 + 127) << 23);
  float s2 = std::bit_cast<float>(uint32_t(n2 + 127) << 23);
  float result = p * s1 * s2;
  result = x < kMin ? 0.0f : result;
  result = x > kMax ? std::numeric_limits<float>::infinity() : result;
  return x != x ? x : result;
}

inline float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Long rows (50257 classes) are summed in blocks: f32 lane sums within a block, the block sums in
// double, so the error stays that of a 512-element sum.
inline constexpr int64_t kSumBlock = 512;

inline float row_sum(const float* x, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t end = n - b < kSumBlock ? n : b + kSumBlock;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = b; i < end; ++i) s += x[i];
    total += s;
  }
  return float(total);
}

#ifdef TS_ROW_MATH_AVX2
// Eight lanes of exp_approx (same steps, same special cases).
inline __m256 exp_approx8(__m256 x) {
  using namespace exp_const;
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kMin)), _mm256_set1_ps(kMax));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP[0]);
  for (int k = 1; k < 6; ++k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[k]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i n1 = _mm256_srai_epi32(ni, 1);
  __m256i n2 = _mm256_sub_epi32(ni, n1);
  __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  result = _mm256_blendv_ps(result, _mm256_setzero_ps(),
                            _mm256_cmp_ps(x, _mm256_set1_ps(kMin), _CMP_LT_OQ));
  result = _mm256_blendv_ps(result, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                            _mm256_cmp_ps(x, _mm256_set1_ps(kMax), _CMP_GT_OQ));
  return _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

// sum of exp(x[i] - shift) over one block (n <= kSumBlock), stored into out when non-null.
inline float exp_sum_block(const float* x, float shift, float* out, int64_t n) {
  int64_t i = 0;
  float s = 0.0f;
#ifdef TS_ROW_MATH_AVX2
  const __m256 vs = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
    if (out) _mm256_storeu_ps(out + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  s = hsum8(acc);
#else
  float acc[8] = {};
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float e = exp_approx(x[i + j] - shift);
      if (out) out[i + j] = e;
      acc[j] += e;
    }
  }
  s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
#endif
  for (; i < n; ++i) {
    const float e = exp_approx(x[i] - shift);
    if (out) out[i] = e;
    s += e;
  }
  return s;
}

// sum_i exp(x[i] - shift), nothing stored.
inline float row_exp_sum(const float* x, float shift, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    total += exp_sum_block(x + b, shift, nullptr, n - b < kSumBlock ? n - b : kSumBlock);
  }
  return float(total);
}

// out[i] = exp(x[i] - shift); returns their sum. out may alias x.
inline float row_exp_store(const float* x, float shift, float* out, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    total += exp_sum_block(x + b, shift, out + b, n - b < kSumBlock ? n - b : kSumBlock);
  }
  return float(total);
}

// out[i] = exp(x[i] - shift) * scale + add, nothing summed (softmax from a known log-sum-exp, and
// the cross-entropy gradient's smoothing term).
inline void row_exp_scale_add(const float* x, float shift, float scale, float add, float* out, int64_t n) {
  int64_t i = 0;
#ifdef TS_ROW_MATH_AVX2
  __m256 vs = _mm256_set1_ps(shift), vscale = _mm256_set1_ps(scale), vadd = _mm256_set1_ps(add);
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp_approx8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(e, vscale, vadd));
  }
#endif
  for (; i < n; ++i) out[i] = exp_approx(x[i] - shift) * scale + add;
}

// out[i] = g[i] - exp(y[i]) * scale (log-softmax and cross-entropy backwards). out may alias g or y.
inline void row_sub_exp_scale(const float* g, const float* y, float scale, float* out, int64_t n) {
  int64_t i = 0;
#ifdef TS_ROW_MATH_AVX2
  __m256 vscale = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp_approx8(_mm256_loadu_ps(y + i));
    _mm256_storeu_ps(out + i, _mm256_fnmadd_ps(e, vscale, _mm256_loadu_ps(g + i)));
  }
#endif
  for (; i < n; ++i) out[i] = g[i] - exp_approx(y[i]) * scale;
}

template <typename T>
inline constexpr bool kIsF32 = std::is_same_v<T, float>;

// dst[i] = float(src[i * stride]).
template <typename T>
inline void load_row(const T* src, int64_t stride, float* dst, int64_t n) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i * stride]);
  }
}

// dst[i * stride] = T(src[i]) (round to nearest even for 16-bit types).
template <typename T>
inline void store_row(const float* src, T* dst, int64_t stride, int64_t n) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * stride] = T(src[i]);
  }
}

// A row of a T tensor as contiguous f32: the row itself when it already is one, else a copy into
// `scratch` (sized by the caller's thread).
template <typename T>
inline const float* row_as_f32(const T* src, int64_t stride, int64_t n, std::vector<float>& scratch) {
  if constexpr (kIsF32<T>) {
    if (stride == 1) return src;
  }
  scratch.resize(size_t(n));
  load_row(src, stride, scratch.data(), n);
  return scratch.data();
}

// Rows per parallel chunk so that a chunk holds at least ~16K elements (thread start-up is ~us).
inline int64_t row_grain(int64_t cols) {
  constexpr int64_t kChunkElems = 16384;
  return cols >= kChunkElems ? 1 : kChunkElems / (cols > 0 ? cols : 1);
}

// Product of all dims but the last (1 for a scalar): the number of rows a last-dim kernel sees.
inline int64_t leading_rows(const Tensor& t) {
  return t.dim() == 0 ? 1 : t.numel() / (t.shape().back() > 0 ? t.shape().back() : 1);
}
inline int64_t last_dim(const Tensor& t) { return t.dim() == 0 ? 1 : t.shape().back(); }

// A contiguous tensor a kernel can write `out`'s values into: `out` itself when it is contiguous,
// else a scratch (holding out's values when `keep_values`) that finish_output copies back.
inline Tensor contiguous_output(const Tensor& out, bool keep_values = false) {
  if (out.is_contiguous()) return out;
  if (keep_values) return out.clone();
  return empty(out.shape(), {.dtype = out.dtype(), .device = out.device()});
}
inline void finish_output(const Tensor& written, const Tensor& out) {
  if (!written.is_same(out)) out.copy_(written);
}

}  // namespace tessera::kernels::cpu::detail
