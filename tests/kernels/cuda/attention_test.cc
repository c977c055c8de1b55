// CUDA fused attention against the CPU kernel on the same inputs: outputs, lse and all three
// gradients for f32, f16 and bf16, head dims 32/64/128, odd T and S (not multiples of the 32-wide
// tiles), T != S, causal, padding masks with fully masked rows, dropout (same philox mask), scale
// override, strided views and empty sequences. Skips without a GPU.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/kernels/attention_cases.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

namespace {

using namespace tessera;
using kernels::AttentionOptions;
using namespace testing::attention;

void run_case(const Case& c) {
  INFO(name_of(c));
  const Device gpu = cuda_device();
  const kernels::AttentionOptions o = options_of(c);
  const Results ref = cpu_results(c, make_inputs(c));
  const Inputs in = make_inputs(c, gpu);
  const Results got = garbage_results(c, gpu);
  kernels::attention_forward(in.q, in.k, in.v, in.mask, o, got.out, got.lse);
  kernels::attention_backward(in.q, in.k, in.v, ref.out.to(gpu), ref.lse.to(gpu), in.grad_out,
                              in.mask, o, got.grad_q, got.grad_k, got.grad_v);
  require_matches(c, got, ref);
}

}  // namespace

TEST_CASE("cuda attention f32 matches the CPU: causal, masks, odd sizes", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  run_case({.B = 2, .H = 3, .T = 37, .S = 37, .D = 64, .dtype = DType::f32, .causal = true});
  run_case({.B = 3, .H = 2, .T = 45, .S = 70, .D = 32, .dtype = DType::f32, .mask = true});
  run_case({.B = 3,
            .H = 1,
            .T = 70,
            .S = 45,
            .D = 128,
            .dtype = DType::f32,
            .causal = true,
            .mask = true});
  run_case({.B = 1, .H = 2, .T = 1, .S = 1, .D = 32, .dtype = DType::f32});
  run_case({.B = 2,
            .H = 2,
            .T = 64,
            .S = 96,
            .D = 64,
            .dtype = DType::f32,
            .causal = true,
            .scale = 0.3f});
}

TEST_CASE("cuda attention dropout draws the CPU's mask", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  run_case({.B = 3,
            .H = 2,
            .T = 45,
            .S = 70,
            .D = 32,
            .dtype = DType::f32,
            .mask = true,
            .dropout = 0.2f});
  run_case({.B = 2,
            .H = 2,
            .T = 33,
            .S = 33,
            .D = 64,
            .dtype = DType::f32,
            .causal = true,
            .dropout = 0.5f});
  run_case({.B = 3,
            .H = 1,
            .T = 50,
            .S = 41,
            .D = 128,
            .dtype = DType::f32,
            .causal = true,
            .mask = true,
            .dropout = 0.1f});
  // A head shard and a (query, key) block of a larger draw (tensor and sequence parallelism).
  run_case({.B = 2,
            .H = 2,
            .T = 37,
            .S = 40,
            .D = 64,
            .dtype = DType::f32,
            .causal = true,
            .mask = true,
            .dropout = 0.2f,
            .dropout_block = true});
  run_case({.B = 1,
            .H = 2,
            .T = 45,
            .S = 70,
            .D = 32,
            .dtype = DType::bf16,
            .dropout = 0.2f,
            .dropout_block = true});
}

TEST_CASE("cuda attention 16-bit floats and strided views", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  run_case({.B = 2, .H = 3, .T = 37, .S = 53, .D = 64, .dtype = DType::f16, .causal = true});
  run_case({.B = 3,
            .H = 2,
            .T = 70,
            .S = 45,
            .D = 128,
            .dtype = DType::f16,
            .mask = true,
            .dropout = 0.1f});
  run_case({.B = 2,
            .H = 2,
            .T = 33,
            .S = 65,
            .D = 64,
            .dtype = DType::bf16,
            .causal = true,
            .dropout = 0.1f,
            .strided = true});
  run_case({.B = 3, .H = 2, .T = 40, .S = 40, .D = 32, .dtype = DType::bf16, .mask = true});
  run_case({.B = 2,
            .H = 3,
            .T = 29,
            .S = 31,
            .D = 32,
            .dtype = DType::f32,
            .causal = true,
            .mask = true,
            .strided = true});
}

TEST_CASE("cuda attention: fully masked rows give zeros and -inf lse", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  const Case c{.B = 2, .H = 1, .T = 5, .S = 7, .D = 32, .dtype = DType::f32, .mask = true};
  const Device gpu = cuda_device();
  Generator gen(9);
  const Tensor q = randn({2, 1, 5, 32}, {.device = gpu}, &gen),
               k = randn({2, 1, 7, 32}, {.device = gpu}, &gen),
               v = randn({2, 1, 7, 32}, {.device = gpu}, &gen);
  const Tensor out = full({2, 1, 5, 32}, 5.0, {.device = gpu}),
               lse = full({2, 1, 5}, 5.0, {.device = gpu});
  kernels::attention_forward(q, k, v, padding_mask(c).to(gpu), {}, out, lse);
  const std::vector<double> o = testing::to_doubles(out.select(0, 1)),
                            l = testing::to_doubles(lse.select(0, 1));
  for (double x : o) REQUIRE(x == 0.0);
  for (double x : l) REQUIRE(x == -INFINITY);
  for (double x : testing::to_doubles(lse.select(0, 0))) REQUIRE(std::isfinite(x));
}

TEST_CASE("cuda attention: empty queries zero the key gradients", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  const Device gpu = cuda_device();
  const TensorOptions f32{.device = gpu};
  const Tensor q = zeros({2, 2, 0, 64}, f32), k = ones({2, 2, 5, 64}, f32),
               v = ones({2, 2, 5, 64}, f32);
  const Tensor out = zeros({2, 2, 0, 64}, f32), lse = zeros({2, 2, 0}, f32);
  kernels::attention_forward(q, k, v, Tensor(), {}, out, lse);
  const Tensor dq = zeros({2, 2, 0, 64}, f32), dk = full({2, 2, 5, 64}, 3.0, f32),
               dv = full({2, 2, 5, 64}, 3.0, f32);
  kernels::attention_backward(q, k, v, out, lse, out, Tensor(), {}, dq, dk, dv);
  for (double x : testing::to_doubles(dk)) REQUIRE(x == 0.0);
  for (double x : testing::to_doubles(dv)) REQUIRE(x == 0.0);
}

TEST_CASE("cuda attention rejects unsupported head dims", "[cuda][attention]") {
  TS_REQUIRE_GPU();
  const TensorOptions f32{.device = cuda_device()};
  const Tensor q = zeros({1, 1, 4, 48}, f32), out = zeros({1, 1, 4, 48}, f32),
               lse = zeros({1, 1, 4}, f32);
  REQUIRE_THROWS_WITH(kernels::attention_forward(q, q, q, Tensor(), {}, out, lse),
                      Catch::Contains("head dim of 32, 64 or 128"));
}
