// The tensor-core attention kernels (kernels/cuda/attention_mma_body.cuh) under the SIMT emulator
// against the CPU kernel on the same f16/bf16 inputs: output, lse and the three gradients, head
// dims 32/64/128, sizes that are not multiples of the 64-row tiles, T != S both ways, causal,
// padding masks with fully masked rows, dropout (the CPU's philox mask), a scale override, and
// dense, permuted and column-major views (the 16-byte and the element-wise tile loaders). The same
// kernels run on a GPU in tests/kernels/cuda/attention_test.cc; here they run on any machine.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
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

// Calls fn.template operator()<T, D>() for the case's dtype and head dim.
template <typename Fn>
void dispatch(const Case& c, Fn&& fn) {
  auto by_dim = [&]<typename T>() {
    if (c.D == 32) return fn.template operator()<T, 32>();
    if (c.D == 64) return fn.template operator()<T, 64>();
    return fn.template operator()<T, 128>();
  };
  if (c.dtype == DType::f16) return by_dim.template operator()<Half>();
  return by_dim.template operator()<BFloat16>();
}

void emulated_forward(const Case& c, const attention_detail::Problem& p, const Tensor& q,
                      const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse) {
  using attention_detail::operand;
  dispatch(c, [&]<typename T, int D>() {
    using F = attention_mma::Forward<T, D>;
    const int64_t q_tiles = tiles(p.T);
    simt::emulate(p.B * p.H * q_tiles, attention_mma::kThreads, F::kSharedBytes,
                  [&](int64_t block, int tid, unsigned char* shared) {
                    F::run(p, operand(q), operand(k), operand(v), operand(out),
                           attention_detail::row_operand(lse), q_tiles, block, tid, shared);
                  });
  });
}

void emulated_backward(const Case& c, const attention_detail::Problem& p, const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                       const Tensor& grad_out, const Tensor& grad_q, const Tensor& grad_k,
                       const Tensor& grad_v) {
  using attention_detail::operand;
  // The row pass of attention_backward.cu: delta = rowsum(dO * O), lse_use = lse or +inf.
  std::vector<float> delta(size_t(p.B * p.H * p.T)), lse_use(delta.size());
  dispatch(c, [&]<typename T, int>() {
    simt::emulate(attention_detail::row_stats_blocks(p), attention_detail::kThreads, 0,
                  [&](int64_t block, int tid, unsigned char*) {
                    attention_detail::row_stats<T>(p, operand(out), operand(grad_out),
                                                   attention_detail::row_operand(lse), delta.data(),
                                                   lse_use.data(), block, tid);
                  });
  });
  dispatch(c, [&]<typename T, int D>() {
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

void run_case(const Case& c) {
  INFO(name_of(c));
  AttentionOptions o;
  o.causal = c.causal;
  o.scale = c.scale;
  o.dropout_p = c.dropout;
  o.seed = 1234;
  o.offset = 77;
  const Tensor mask = c.mask ? padding_mask(c) : Tensor();
  const Tensor q = head_input(c, c.T, 1), k = head_input(c, c.S, 2), v = head_input(c, c.S, 3);
  const Tensor go = head_input(c, c.T, 4);
  const attention_detail::Problem p = attention_detail::resolve_problem("test", q, k, v, mask, o);
  REQUIRE(attention_detail::operand(q).rows16 ==
          !c.column_major);  // the loader the case means to test

  const Tensor out = empty({c.B, c.H, c.T, c.D}, {.dtype = c.dtype});
  const Tensor lse = empty({c.B, c.H, c.T}, {.dtype = DType::f32});
  kernels::attention_forward(q, k, v, mask, o, out, lse);
  // Garbage first: the kernels must write every element.
  const Tensor out_e = full({c.B, c.H, c.T, c.D}, 7.0, {.dtype = c.dtype});
  const Tensor lse_e = full({c.B, c.H, c.T}, 7.0, {.dtype = DType::f32});
  emulated_forward(c, p, q, k, v, out_e, lse_e);
  require_near(out_e, out, c.dtype, "out");
  {
    INFO("lse");
    testing::require_close(lse_e, lse, 1e-5, 1e-5);
  }

  // Backward from the CPU's forward results, so the comparison sees only the backward.
  const Tensor dq = empty(q.shape(), {.dtype = c.dtype}), dk = empty(k.shape(), {.dtype = c.dtype}),
               dv = empty(v.shape(), {.dtype = c.dtype});
  kernels::attention_backward(q, k, v, out, lse, go, mask, o, dq, dk, dv);
  const Tensor dq_e = full(q.shape(), 3.0, {.dtype = c.dtype}),
               dk_e = full(k.shape(), 3.0, {.dtype = c.dtype}),
               dv_e = full(v.shape(), 3.0, {.dtype = c.dtype});
  emulated_backward(c, p, q, k, v, out, lse, go, dq_e, dk_e, dv_e);
  require_near(dq_e, dq, c.dtype, "grad_q");
  require_near(dk_e, dk, c.dtype, "grad_k");
  require_near(dv_e, dv, c.dtype, "grad_v");
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
