// AVX-512 SGEMM micro-kernel. The file is compiled at the x86-64-v3 baseline like everything else,
// so its functions carry a target attribute and are only called when cpu_has_avx512() is true.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_microkernel.h"

#define TS_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

namespace tessera::kernels::cpu::detail {
namespace {

// Tiles of kMr rows x kNv zmm vectors (16 floats each): kMr * kNv accumulators stay in registers
// and every B vector loaded is reused kMr times, every broadcast A value kNv times. 8 x 48 for
// most products; 6 x 64 for widths that are multiples of 64 but not of 48 (attention's head
// dim 64, where an 8 x 48 tiling leaves a 16-wide tile doing a third of its FMAs' work).

TS_TARGET_AVX512 inline __mmask16 column_mask(int n, int vector) {
  const int left = n - 16 * vector;
  if (left >= 16) return 0xFFFF;
  if (left <= 0) return 0;
  return static_cast<__mmask16>((1u << left) - 1);
}

template <int kMr, int kNv>
TS_TARGET_AVX512 void micro_kernel(int64_t kc, const float* a_panel, const float* b_panel,
                                   float* c, int64_t ldc, float alpha, float beta, const float* bias,
                                   int m, int n) {
  constexpr int kNr = 16 * kNv;
  // Warm the C tile while the k loop runs; it is read (or written) only at the end.
#pragma GCC unroll 16
  for (int i = 0; i < kMr; ++i) {
    if (i < m) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNr - 1), _MM_HINT_T0);
    }
  }

  __m512 acc[kMr][kNv];
#pragma GCC unroll 16
  for (int i = 0; i < kMr; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_setzero_ps();
  }

  const float* a = a_panel;  // (kc, kMr)
  const float* b = b_panel;  // (kc, kNr)
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += kMr;
    b += kNr;
  }

  // Masked loads and stores handle the ragged right edge; rows past m are skipped.
  __mmask16 masks[kNv];
#pragma GCC unroll 4
  for (int v = 0; v < kNv; ++v) masks[v] = column_mask(n, v);
  const __m512 alpha_v = _mm512_set1_ps(alpha);
  const __m512 beta_v = _mm512_set1_ps(beta);
  // The bias joins the store: a linear layer's output takes no separate pass to add it.
  __m512 bias_v[kNv];
#pragma GCC unroll 4
  for (int v = 0; v < kNv; ++v) {
    bias_v[v] = bias != nullptr ? _mm512_maskz_loadu_ps(masks[v], bias + 16 * v) : _mm512_setzero_ps();
  }
#pragma GCC unroll 16
  for (int i = 0; i < kMr; ++i) {
    if (i >= m) break;
    float* c_row = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      __m512 r = _mm512_fmadd_ps(acc[i][v], alpha_v, bias_v[v]);
      // beta == 0 must not read C: 0 * NaN would leak NaN into the result.
      if (beta != 0.0f) {
        r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(masks[v], c_row + 16 * v), beta_v, r);
      }
      _mm512_mask_storeu_ps(c_row + 16 * v, masks[v], r);
    }
  }
}

// The A panel (mr x kc floats) takes half the L1d: kc = 512 for 8 x 48 tiles on a 32 KiB L1d
// (Zen 4, Skylake-X), 768 on a 48 KiB one (Zen 5, Ice Lake). A deeper block makes fewer passes
// over C: from 256 to 512 the GPT-2 linears ran 3-7% faster on a Zen 4 host (K = 3072 the most);
// from 512 to 768 on a Zen 5 host, a K = 768 product writes C once instead of twice, and in
// alternating runs of all 55 products the 256-token ones ran a median 5.8% faster, the LM head's
// forward 5.8%, the median product 2.3%. The B block (kc x nc floats) keeps 768 KiB of the
// 1-2 MiB L2 at any kc.
template <int kMr, int kNv>
GemmKernel sized_kernel() {
  constexpr int kNr = 16 * kNv;
  const int64_t half_l1d_depth = l1d_cache_bytes() / 2 / (kMr * 4);
  const int64_t kc = std::clamp<int64_t>(half_l1d_depth / 256 * 256, 256, 1024);
  const int64_t nc = std::max<int64_t>(kNr, 768 * 1024 / (kc * 4) / kNr * kNr);
  return GemmKernel{"avx512", kMr, kNr, kc, /*mc=*/1024, nc, &micro_kernel<kMr, kNv>};
}

}  // namespace

GemmKernel gemm_kernel_avx512() {
  // 8 x 48 tiles divide the GPT-2 sizes (256, 768, 2304, 3072) exactly, so no padded work.
  static const GemmKernel kernel = sized_kernel<8, 3>();
  return kernel;
}

GemmKernel gemm_kernel_avx512_n64() {
  static const GemmKernel kernel = sized_kernel<6, 4>();
  return kernel;
}

}  // namespace tessera::kernels::cpu::detail
