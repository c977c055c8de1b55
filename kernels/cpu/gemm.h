// Single-precision GEMM on raw row-major pointers: BLIS-style packing and cache blocking, OpenMP
// threads, and a micro-kernel (AVX2 or AVX-512) chosen at run time.
#pragma once

#include <cstdint>

namespace tessera::kernels::cpu {

// C (M x N) = alpha * op(A) * op(B) + beta * C. Row-major. op(A) is (M x K): A is stored (M x K)
// with row stride lda, or, when trans_a, (K x M) with row stride lda. Same for B (K x N / N x K).
// beta == 0 means C is write-only (NaNs in C must not leak through). Throws ValueError on negative
// sizes or leading dimensions smaller than the stored row width.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc);

// The same for `batch` independent products, matrix i at A + i*stride_a etc. (stride 0 =
// broadcast). stride_c == 0 accumulates every product into one C, applied in batch order.
// A bias (N values), when given, is added to every row of every product as it is stored: a linear
// layer's forward in one pass over C.
void sgemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                   float alpha, const float* A, int64_t lda, int64_t stride_a, const float* B,
                   int64_t ldb, int64_t stride_b, float beta, float* C, int64_t ldc,
                   int64_t stride_c, const float* bias = nullptr);

// Which micro-kernel runs on this CPU: "avx512" or "avx2" (for the bench table).
const char* sgemm_isa();

}  // namespace tessera::kernels::cpu
