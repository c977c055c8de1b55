// CPU dropout: out[i] = keep(i) ? x[i] * scale : 0 over the flat row-major index i, split across
// threads in contiguous ranges (the mask depends only on the counter, never on the split). The mask
// is drawn eight counters at a time with an AVX2 Philox that matches core/philox.h bit for bit.
#include "kernels/cpu/dropout.h"

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"
#include "kernels/cpu/row_math.h"
#include "kernels/dropout_math.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tessera::kernels::cpu {
namespace {

constexpr int64_t kBlock = 512;  // mask elements drawn before they are applied

#if defined(__AVX2__)
// lo/hi halves of the 32x32-bit products m * b in all eight lanes (mul_epu32 covers even lanes).
inline void mulhilo8(__m256i m, __m256i b, __m256i* lo, __m256i* hi) {
  const __m256i even = _mm256_mul_epu32(b, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(b, 32), m);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// First output word of philox(seed, counter) for counter = first + 0..7: core/philox.h's rounds.
inline __m256i philox_word0_x8(uint64_t seed, uint64_t first) {
  alignas(32) uint32_t lo[8], hi[8];
  for (int j = 0; j < 8; ++j) {
    const uint64_t c = first + uint64_t(j);
    lo[j] = uint32_t(c);
    hi[j] = uint32_t(c >> 32);
  }
  __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
  __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  const __m256i m0 = _mm256_set1_epi32(int32_t(0xD2511F53u)),
                m1 = _mm256_set1_epi32(int32_t(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    __m256i lo0, hi0, lo1, hi1;
    mulhilo8(m0, c0, &lo0, &hi0);
    mulhilo8(m1, c2, &lo1, &hi1);
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(int32_t(k0)));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(int32_t(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}
#endif

// keep[k] = dropout_keep(seed, first + k) for k < n (n <= kBlock).
void draw_mask(uint64_t seed, uint64_t first, uint32_t threshold, int64_t n, uint8_t* keep) {
  int64_t k = 0;
#if defined(__AVX2__)
  // Top 24 bits are < 2^24, so a signed compare against threshold - 1 (-1 when threshold is 0)
  // works.
  const __m256i limit = _mm256_set1_epi32(int32_t(threshold) - 1);
  for (; k + 8 <= n; k += 8) {
    const __m256i bits = _mm256_srli_epi32(philox_word0_x8(seed, first + uint64_t(k)), 8);
    const int lanes = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(bits, limit)));
    for (int j = 0; j < 8; ++j) keep[k + j] = uint8_t((lanes >> j) & 1);
  }
#endif
  for (; k < n; ++k) keep[k] = dropout_keep(seed, first + uint64_t(k), threshold);
}

}  // namespace

void dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& out) {
  const char* op = "dropout";
  TS_CHECK(x.shape() == out.shape() && x.dtype() == out.dtype(), op, "expected out like x, got x ",
           x.describe(), " and out ", out.describe());
  TS_CHECK(p >= 0.0 && p <= 1.0, op, "expected p in [0, 1], got ", p);
  const int64_t n = x.numel();
  if (n == 0) return;
  Tensor xc = x.contiguous();
  Tensor oc = detail::contiguous_output(out);
  const uint32_t threshold = dropout_threshold(p);
  const float scale = dropout_scale(p);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    const T* xp = static_cast<const T*>(xc.data_ptr());
    T* out_p = static_cast<T*>(oc.data_ptr());
    parallel_for(n, 16384, [&](int64_t begin, int64_t end) {
      uint8_t keep[kBlock];
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t len = std::min(kBlock, end - b);
        draw_mask(seed, offset + uint64_t(b), threshold, len, keep);
        const T* xb = xp + b;
        T* ob = out_p + b;
        for (int64_t k = 0; k < len; ++k) ob[k] = keep[k] ? T(float(xb[k]) * scale) : T(0.0f);
      }
    });
  });
  detail::finish_output(oc, out);
}

}  // namespace tessera::kernels::cpu
