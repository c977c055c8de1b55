// The CUDA attention kernels under the SIMT emulator against the CPU kernel on the same inputs:
// the tensor-core kernels (kernels/cuda/attention_mma_body.cuh, f16/bf16) and the f32-FMA kernels
// (attention_fma_body.cuh, any dtype), with the backward's row pass; output, lse and the three
// gradients, head dims 32/64/128, sizes that are not multiples of the tiles, T != S both ways,
// causal, padding masks with fully masked rows, dropout (the CPU's philox mask), a scale override,
// and dense, permuted and column-major views (the 16-byte and the element-wise tile loaders). The
// same kernels run on a GPU in tests/kernels/cuda/attention_test.cc.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/cuda/attention_fma_body.cuh"
#include "kernels/cuda/attention_mma_body.cuh"
#include "kernels/cuda/attention_row_stats_body.cuh"
#include "kernels/kernels.h"
#include "tests/kernels/attention_cases.h"
#include "tests/testing/compare.h"
#include "tests/testing/simt_emulator.h"

namespace {

using namespace tessera;
using namespace tessera::kernels::cuda;
using kernels::AttentionOptions;
using namespace testing::attention;

int64_t tiles(int64_t n) { return (n + attention_mma::kTile - 1) / attention_mma::kTile; }

// The kernels a case runs: the tensor-core ones (16-bit inputs) or the f32-FMA ones (any dtype;
// 16-bit inputs reach them on a GPU with TESSERA_ATTENTION_TENSOR_CORES=0).
enum class Path { tensor_cores, fma };

// Calls fn.template operator()<T, D>() for the case's dtype and head dim (f32 only on the FMA path:
// the tensor-core bodies do not instantiate for it).
template <bool kWithF32, typename Fn>
void dispatch(const Case& c, Fn&& fn) {
  auto by_dim = [&]<typename T>() {
    if (c.D == 32) return fn.template operator()<T, 32>();
    if (c.D == 64) return fn.template operator()<T, 64>();
    return fn.template operator()<T, 128>();
  };
  if constexpr (kWithF32) {
    if (c.dtype == DType::f32) return by_dim.template operator()<float>();
  }
  if (c.dtype == DType::f16) return by_dim.template operator()<Half>();
  return by_dim.template operator()<BFloat16>();
}

int64_t fma_tiles(int64_t n) {
  return (n + attention_detail::kBlockQ - 1) / attention_detail::kBlockQ;
}

void emulated_forward_fma(const Case& c, const attention_detail::Problem& p, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse) {
  using namespace attention_detail;
  dispatch<true>(c, [&]<typename T, int D>() {
    const int64_t q_tiles = fma_tiles(p.T);
    simt::emulate(p.B * p.H * q_tiles, kThreads, forward_shared_floats<D>() * sizeof(float),
                  [&](int64_t block, int tid, unsigned char* shared) {
                    forward_body<T, D>(p, operand(q), operand(k), operand(v), operand(out),
                                       row_operand(lse), q_tiles, block, tid,
                                       reinterpret_cast<float*>(shared));
                  });
  });
}

void emulated_forward(const Case& c, Path path, const attention_detail::Problem& p, const Tensor& q,
                      const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse) {
  using attention_detail::operand;
  if (path == Path::fma) return emulated_forward_fma(c, p, q, k, v, out, lse);
  dispatch<false>(c, [&]<typename T, int D>() {
    using F = attention_mma::Forward<T, D>;
    const int64_t q_tiles = tiles(p.T);
    simt::emulate(p.B * p.H * q_tiles, attention_mma::kThreads, F::kSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    F::run(p, operand(q), operand(k), operand(v), operand(out),
                           attention_detail::row_operand(lse), q_tiles, block, tid, shared);
                  });
  });
}

void emulated_backward(const Case& c, Path path, const attention_detail::Problem& p,
                       const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& lse, const Tensor& grad_out, const Tensor& grad_q,
                       const Tensor& grad_k, const Tensor& grad_v) {
  using attention_detail::operand;
  // The row pass of attention_backward.cu: delta = rowsum(dO * O), lse_use = lse or +inf.
  std::vector<float> delta(size_t(p.B * p.H * p.T)), lse_use(delta.size());
  dispatch<true>(c, [&]<typename T, int>() {
    simt::emulate(attention_detail::row_stats_blocks(p), attention_detail::kThreads, 0,
                  [&](int64_t block, int tid, unsigned char*) {
                    attention_detail::row_stats<T>(p, operand(out), operand(grad_out),
                                                   attention_detail::row_operand(lse), delta.data(),
                                                   lse_use.data(), block, tid);
                  });
  });
  if (path == Path::fma) {
    using namespace attention_detail;
    dispatch<true>(c, [&]<typename T, int D>() {
      const size_t bytes = backward_shared_floats<D>() * sizeof(float);
      const int64_t k_tiles = fma_tiles(p.S), q_tiles = fma_tiles(p.T);
      simt::emulate(
          p.B * p.H * k_tiles, kThreads, bytes, [&](int64_t block, int tid, unsigned char* shared) {
            dkdv_body<T, D>(p, operand(q), operand(k), operand(v), operand(grad_out), delta.data(),
                            lse_use.data(), operand(grad_k), operand(grad_v), k_tiles, block, tid,
                            reinterpret_cast<float*>(shared));
          });
      simt::emulate(p.B * p.H * q_tiles, kThreads, bytes,
                    [&](int64_t block, int tid, unsigned char* shared) {
                      dq_body<T, D>(p, operand(q), operand(k), operand(v), operand(grad_out),
                                    delta.data(), lse_use.data(), operand(grad_q), q_tiles, block,
                                    tid, reinterpret_cast<float*>(shared));
                    });
    });
    return;
  }
  dispatch<false>(c, [&]<typename T, int D>() {
    using KV = attention_mma::BackwardKV<T, D>;
    using Q = attention_mma::BackwardQ<T, D>;
    const int64_t k_tiles = tiles(p.S), q_tiles = tiles(p.T);
    simt::emulate(p.B * p.H * k_tiles, attention_mma::kThreads, KV::kSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    KV::run(p, operand(q), operand(k), operand(v), operand(grad_out), delta.data(),
                            lse_use.data(), operand(grad_k), operand(grad_v), k_tiles, block, tid,
                            shared);
                  });
    simt::emulate(p.B * p.H * q_tiles, attention_mma::kThreads, Q::kSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    Q::run(p, operand(q), operand(k), operand(v), operand(grad_out), delta.data(),
                           lse_use.data(), operand(grad_q), q_tiles, block, tid, shared);
                  });
  });
}

void run_case(const Case& c, Path path = Path::tensor_cores) {
  INFO(name_of(c) << (path == Path::fma ? " (FMA kernels)" : " (tensor cores)"));
  const Inputs in = make_inputs(c);
  const attention_detail::Problem p =
      attention_detail::resolve_problem("test", in.q, in.k, in.v, in.mask, options_of(c));
  REQUIRE(attention_detail::operand(in.q).rows16 == !c.column_major);  // the loader meant
  const Results ref = cpu_results(c, in);
  const Results got = garbage_results(c, kCPU);
  emulated_forward(c, path, p, in.q, in.k, in.v, got.out, got.lse);
  emulated_backward(c, path, p, in.q, in.k, in.v, ref.out, ref.lse, in.grad_out, got.grad_q,
                    got.grad_k, got.grad_v);
  require_matches(c, got, ref);
}

}  // namespace

TEST_CASE("tensor-core attention (emulated) matches the CPU: causal, odd sizes, T != S",
          "[simt][attention]") {
  run_case({.B = 1, .H = 2, .T = 70, .S = 70, .D = 64, .dtype = DType::bf16, .causal = true});
  run_case({.B = 1, .H = 1, .T = 37, .S = 100, .D = 32, .dtype = DType::f16, .causal = true});
  run_case({.B = 1,
            .H = 1,
            .T = 100,
            .S = 45,
            .D = 128,
            .dtype = DType::bf16,
            .causal = true,
            .scale = 0.3f});
  run_case({.B = 1, .H = 1, .T = 1, .S = 1, .D = 64, .dtype = DType::f16});
}

TEST_CASE("tensor-core attention (emulated): full tiles, masks and dropout", "[simt][attention]") {
  run_case({.B = 1, .H = 1, .T = 128, .S = 128, .D = 64, .dtype = DType::f16, .causal = true});
  run_case({.B = 3,
            .H = 1,
            .T = 45,
            .S = 70,
            .D = 32,
            .dtype = DType::bf16,
            .mask = true,
            .dropout = 0.2f});
  run_case({.B = 1, .H = 2, .T = 64, .S = 64, .D = 128, .dtype = DType::f16, .dropout = 0.1f});
  run_case({.B = 2,
            .H = 2,
            .T = 45,
            .S = 70,
            .D = 32,
            .dtype = DType::bf16,
            .causal = true,
            .mask = true,
            .dropout = 0.2f,
            .dropout_block = true});
}

TEST_CASE("tensor-core attention (emulated): strided and column-major views", "[simt][attention]") {
  run_case({.B = 2,
            .H = 2,
            .T = 33,
            .S = 65,
            .D = 64,
            .dtype = DType::bf16,
            .causal = true,
            .dropout = 0.1f,
            .strided = true});
  run_case({.B = 3,
            .H = 2,
            .T = 29,
            .S = 31,
            .D = 32,
            .dtype = DType::f16,
            .causal = true,
            .mask = true,
            .column_major = true});
  run_case(
      {.B = 1, .H = 1, .T = 65, .S = 80, .D = 128, .dtype = DType::bf16, .column_major = true});
}

TEST_CASE("f32-FMA attention (emulated) matches the CPU: f32 and 16-bit inputs",
          "[simt][attention]") {
  run_case({.B = 2, .H = 2, .T = 37, .S = 37, .D = 64, .dtype = DType::f32, .causal = true},
           Path::fma);
  run_case({.B = 3,
            .H = 1,
            .T = 45,
            .S = 70,
            .D = 32,
            .dtype = DType::f32,
            .mask = true,
            .dropout = 0.2f},
           Path::fma);
  run_case({.B = 1,
            .H = 1,
            .T = 70,
            .S = 45,
            .D = 128,
            .dtype = DType::f32,
            .causal = true,
            .scale = 0.3f},
           Path::fma);
  run_case({.B = 2,
            .H = 2,
            .T = 29,
            .S = 31,
            .D = 32,
            .dtype = DType::f32,
            .causal = true,
            .mask = true,
            .column_major = true},
           Path::fma);
  run_case({.B = 1,
            .H = 2,
            .T = 33,
            .S = 65,
            .D = 64,
            .dtype = DType::bf16,
            .causal = true,
            .dropout = 0.1f,
            .strided = true},
           Path::fma);
  run_case({.B = 1, .H = 1, .T = 1, .S = 1, .D = 32, .dtype = DType::f16}, Path::fma);
  run_case({.B = 2,
            .H = 2,
            .T = 37,
            .S = 40,
            .D = 64,
            .dtype = DType::f32,
            .mask = true,
            .dropout = 0.2f,
            .dropout_block = true},
           Path::fma);
}
