// Internal contract between the GEMM driver (gemm.cc) and its ISA-specific micro-kernels
// (gemm_avx2.cc, gemm_avx512.cc). Not part of the public API; tests use it to pin an ISA.
#pragma once

#include <cstdint>

namespace tessera::kernels::cpu::detail {

// One register tile: C (m x n) = alpha * Ap * Bp + beta * C (+ bias) for the top-left (m, n)
// corner of an (mr, nr) tile, m <= mr, n <= nr. Ap is a packed (kc, mr) panel (mr values per k),
// Bp a packed (kc, nr) panel; both are zero-padded and 64-byte aligned. beta == 0: C is not read.
// bias, when not null, holds n values, bias[j] added to column j of every row.
using MicroKernelFn = void (*)(int64_t kc, const float* a_panel, const float* b_panel, float* c,
                               int64_t ldc, float alpha, float beta, const float* bias, int m, int n);

// A micro-kernel with the cache blocking tuned for it.
struct GemmKernel {
  const char* isa;
  int mr;      // rows of C per tile (broadcast dimension)
  int nr;      // columns of C per tile (vector dimension)
  int64_t kc;  // depth of a packed block: a (kc, mr) A panel stays in L1
  int64_t mc;  // rows of the packed A block, shared by the threads (L3)
  int64_t nc;  // columns of one thread's packed B block (kc, nc), kept in its L2
  MicroKernelFn kernel;
};

GemmKernel gemm_kernel_avx2();
// Only call when cpu_has_avx512() is true. The n64 kernel has 6 x 64 tiles, for C widths that are
// multiples of 64 but not of 48.
GemmKernel gemm_kernel_avx512();
GemmKernel gemm_kernel_avx512_n64();

enum class GemmIsa { kAuto, kAvx2, kAvx512 };

// sgemm_batched with an explicit ISA, so tests can cover both micro-kernels on one host.
// kAvx512 on a host without AVX-512 throws ValueError.
void sgemm_batched_with_isa(GemmIsa isa, bool trans_a, bool trans_b, int64_t batch, int64_t M,
                            int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                            int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b,
                            float beta, float* C, int64_t ldc, int64_t stride_c,
                            const float* bias = nullptr);

}  // namespace tessera::kernels::cpu::detail
