// AVX2 + FMA SGEMM micro-kernel: the portable x86-64-v3 baseline path.
#include <immintrin.h>

#include "kernels/cpu/gemm_microkernel.h"

namespace tessera::kernels::cpu::detail {
namespace {

// 6 rows x 2 ymm vectors: 12 accumulators + 2 B vectors + 1 broadcast fit the 16 ymm registers.
constexpr int kMr = 6;
constexpr int kNv = 2;
constexpr int kNr = 8 * kNv;

// Lane mask (all ones in the first `left` lanes) for a ragged right edge.
inline __m256i column_mask(int left) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lanes);
}

inline __m256 load_c(const float* p, bool full, __m256i mask) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

inline void store_c(float* p, bool full, __m256i mask, __m256 v) {
  if (full) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, mask, v);
  }
}

void micro_kernel(int64_t kc, const float* a_panel, const float* b_panel, float* c, int64_t ldc,
                  float alpha, float beta, const float* bias, int m, int n) {
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) {
    if (i < m) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNr - 1), _MM_HINT_T0);
    }
  }

  __m256 acc[kMr][kNv];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) acc[i][v] = _mm256_setzero_ps();
  }

  const float* a = a_panel;  // (kc, kMr)
  const float* b = b_panel;  // (kc, kNr)
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    __m256 bv[kNv];
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) bv[v] = _mm256_load_ps(b + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 2
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += kMr;
    b += kNr;
  }

  // AMD's masked stores are slow, so full vectors take the plain path.
  bool full[kNv];
  __m256i masks[kNv];
#pragma GCC unroll 2
  for (int v = 0; v < kNv; ++v) {
    full[v] = n - 8 * v >= 8;
    masks[v] = column_mask(n - 8 * v);
  }
  const __m256 alpha_v = _mm256_set1_ps(alpha);
  const __m256 beta_v = _mm256_set1_ps(beta);
  // The bias joins the store: a linear layer's output takes no separate pass to add it.
  __m256 bias_v[kNv];
#pragma GCC unroll 2
  for (int v = 0; v < kNv; ++v) {
    bias_v[v] = bias != nullptr && n > 8 * v ? load_c(bias + 8 * v, full[v], masks[v]) : _mm256_setzero_ps();
  }
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) {
    if (i >= m) break;
    float* c_row = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) {
      if (!full[v] && n <= 8 * v) continue;
      __m256 r = _mm256_fmadd_ps(acc[i][v], alpha_v, bias_v[v]);
      // beta == 0 must not read C: 0 * NaN would leak NaN into the result.
      if (beta != 0.0f) r = _mm256_fmadd_ps(load_c(c_row + 8 * v, full[v], masks[v]), beta_v, r);
      store_c(c_row + 8 * v, full[v], masks[v], r);
    }
  }
}

}  // namespace

GemmKernel gemm_kernel_avx2() {
  // kc * kMr * 4 B = 6 KiB A panel in L1; kc * nc * 4 B = 384 KiB B block in L2.
  return GemmKernel{"avx2", kMr, kNr, /*kc=*/256, /*mc=*/1020, /*nc=*/384, &micro_kernel};
}

}  // namespace tessera::kernels::cpu::detail
