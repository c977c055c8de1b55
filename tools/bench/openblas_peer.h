// OpenBLAS's cblas_sgemm called directly: the peer of `bench gemm`, and the choice of OpenBLAS
// kernels the PyTorch peer runs. The library is loaded at run time (libopenblas.so.0, which
// python3-torch's BLAS brings), so the bench needs no BLAS at build time and reports a missing one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tessera::bench {

// The OpenBLAS kernel family (an OPENBLAS_CORETYPE value) for the best ISA this host runs:
// "SkylakeX" with AVX-512 F/BW/DQ/VL, "Haswell" with AVX2 and FMA, "" otherwise. OpenBLAS 0.3.21's
// own detection falls back to its SSE3 "Prescott" kernels on CPUs newer than itself (an Emerald
// Rapids Xeon here: 64 GFLOP/s against SkylakeX's 300), which would flatter every GEMM ratio, so
// the peers are pinned to the family the host's ISA runs. Under TESSERA_ISA=avx2 (our AVX2
// kernels on an AVX-512 host) it is "Haswell", so both sides run the same ISA.
std::string openblas_coretype_for_host();
// The family of one ISA: "SkylakeX" (AVX-512) or "Haswell" (AVX2).
const char* openblas_coretype(bool avx512);

// One private copy of libopenblas.so.0 (its own link namespace, so two copies in one process can
// run two kernel families side by side), pinned to a kernel family and a thread count. Never
// unloaded: its OpenMP worker threads run in its own copy of libgomp until the process ends.
class OpenBlas {
 public:
  // nullptr and *reason when the library, one of its symbols or a free link namespace is missing.
  static std::unique_ptr<OpenBlas> load(const std::string& coretype, int threads,
                                        std::string* reason);
  OpenBlas(const OpenBlas&) = delete;
  OpenBlas& operator=(const OpenBlas&) = delete;

  // The kernel family the library reports it runs ("SkylakeX"), and its version line.
  std::string corename() const;
  std::string config() const;

  // Row-major C (m, n) = alpha * op(A) op(B) + beta * C, as kernels::cpu::sgemm takes it.
  void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) const;

 private:
  using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                           int, float, float*, int);
  using NameFn = char* (*)();
  OpenBlas() = default;

  SgemmFn sgemm_ = nullptr;
  NameFn corename_ = nullptr;
  NameFn config_ = nullptr;
};

}  // namespace tessera::bench
