// matmul and linear: NumPy shape semantics, values against hand loops, 16-bit dtypes, errors, and
// finite-difference gradients (batch broadcasting, 1-D operands, non-contiguous inputs).
#include <catch2/catch.hpp>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tests/testing/compare.h"
#include "tests/testing/gradcheck.h"

using namespace tessera;
using tessera::testing::gradcheck;
using tessera::testing::require_close;
using tessera::testing::to_doubles;

namespace {

Tensor rnd(const Shape& shape, uint64_t seed, bool requires_grad = false) {
  Generator gen(seed);
  return randn(shape, {.requires_grad = requires_grad}, &gen);
}

// Reference product of a (batch, M, K) and b (batch, K, N) given as flat row-major doubles, with
// per-operand batch strides (0 when broadcast), in double.
std::vector<double> ref_bmm(const std::vector<double>& a, const std::vector<double>& b, int64_t batch,
                            int64_t a_bstride, int64_t b_bstride, int64_t m, int64_t k, int64_t n) {
  std::vector<double> out(size_t(batch * m * n), 0.0);
  for (int64_t z = 0; z < batch; ++z)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p) s += a[size_t(z * a_bstride + i * k + p)] * b[size_t(z * b_bstride + p * n + j)];
        out[size_t((z * m + i) * n + j)] = s;
      }
  return out;
}

Tensor from_doubles(const std::vector<double>& v, const Shape& shape) {
  return from_vector(std::vector<float>(v.begin(), v.end()), shape);
}

auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };

}  // namespace

TEST_CASE("matmul 2-D matches a hand loop", "[autograd][matmul]") {
  Tensor a = rnd({3, 4}, 1), b = rnd({4, 5}, 2);
  Tensor out = matmul(a, b);
  REQUIRE(out.shape() == Shape{3, 5});
  require_close(out, from_doubles(ref_bmm(to_doubles(a), to_doubles(b), 1, 0, 0, 3, 4, 5), {3, 5}), 1e-5, 1e-5);
}

TEST_CASE("matmul follows NumPy shapes for 1-D and batched operands", "[autograd][matmul]") {
  Tensor v4 = rnd({4}, 3), m45 = rnd({4, 5}, 4), m34 = rnd({3, 4}, 5);
  CHECK(matmul(v4, m45).shape() == Shape{5});
  CHECK(matmul(m34, v4).shape() == Shape{3});
  CHECK(matmul(v4, v4).shape() == Shape{});
  CHECK(matmul(v4, rnd({2, 4, 5}, 6)).shape() == Shape{2, 5});
  CHECK(matmul(rnd({2, 3, 4}, 7), v4).shape() == Shape{2, 3});
  CHECK(matmul(rnd({2, 1, 3, 4}, 8), rnd({5, 4, 2}, 9)).shape() == Shape{2, 5, 3, 2});

  // Values: the dot product and a broadcast batch.
  std::vector<double> vv = to_doubles(v4);
  double dot = 0.0;
  for (double x : vv) dot += x * x;
  CHECK(matmul(v4, v4).item() == Approx(dot).epsilon(1e-5));

  Tensor a = rnd({3, 4}, 10), b = rnd({2, 4, 5}, 11);  // a broadcast over b's batch of 2
  Tensor out = matmul(a, b);
  require_close(out, from_doubles(ref_bmm(to_doubles(a), to_doubles(b), 2, 0, 20, 3, 4, 5), {2, 3, 5}), 1e-5,
                1e-5);
}

TEST_CASE("matmul takes transposed and sliced operands without changing values", "[autograd][matmul]") {
  Tensor at = rnd({4, 3}, 12).transpose(0, 1);            // (3, 4), non-contiguous
  Tensor bs = rnd({4, 10}, 13).slice(1, 0, 10, 2);         // (4, 5), stride 2
  require_close(matmul(at, bs), matmul(at.contiguous(), bs.contiguous()), 1e-6, 1e-6);
}

TEST_CASE("matmul in f16 and bf16 is close to f32, and mixed dtypes promote", "[autograd][matmul]") {
  Tensor a = rnd({5, 8}, 14), b = rnd({8, 6}, 15);
  Tensor ref = matmul(a, b);
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor out = matmul(a.to(dt), b.to(dt));
    REQUIRE(out.dtype() == dt);
    require_close(out, ref, 3e-2, 5e-2);
  }
  Tensor mixed = matmul(a.to(DType::bf16), b);
  CHECK(mixed.dtype() == DType::f32);
}

TEST_CASE("matmul rejects bad shapes and dtypes with clear messages", "[autograd][matmul]") {
  REQUIRE_THROWS_WITH(matmul(rnd({2, 3}, 1), rnd({4, 5}, 2)),
                      Catch::Contains("[matmul] expected inner dims to match, got (2, 3) and (4, 5)"));
  REQUIRE_THROWS_WITH(matmul(rnd({3}, 1), rnd({4}, 2)), Catch::Contains("got (3) and (4)"));
  REQUIRE_THROWS_WITH(matmul(rnd({2, 3, 4}, 1), rnd({3, 4, 5}, 2)), Catch::Contains("[matmul]"));
  REQUIRE_THROWS_WITH(matmul(ones({2, 2}, {.dtype = DType::i64}), ones({2, 2}, {.dtype = DType::i64})),
                      Catch::Contains("expected floating operands"));
  REQUIRE_THROWS_WITH(matmul(scalar_tensor(1.0), rnd({2}, 1)), Catch::Contains("at least 1 dim"));
}

TEST_CASE("matmul gradients: 2-D, 1-D and non-contiguous operands", "[autograd][matmul][gradcheck]") {
  CHECK(gradcheck(mm, {rnd({3, 4}, 1, true), rnd({4, 2}, 2, true)}));
  CHECK(gradcheck(mm, {rnd({4}, 3, true), rnd({4, 3}, 4, true)}));
  CHECK(gradcheck(mm, {rnd({3, 4}, 5, true), rnd({4}, 6, true)}));
  CHECK(gradcheck(mm, {rnd({4}, 7, true), rnd({4}, 8, true)}));
  Tensor at = rnd({4, 3}, 9).transpose(0, 1);
  at.set_requires_grad(true);
  Tensor bs = rnd({4, 6}, 10).slice(1, 1, 6, 2);  // (4, 3)
  bs.set_requires_grad(true);
  CHECK(gradcheck(mm, {at, bs}));
}

TEST_CASE("matmul gradients: batch broadcasting", "[autograd][matmul][gradcheck]") {
  CHECK(gradcheck(mm, {rnd({2, 1, 3, 4}, 11, true), rnd({3, 4, 2}, 12, true)}));
  CHECK(gradcheck(mm, {rnd({3, 4}, 13, true), rnd({2, 4, 2}, 14, true)}));
  CHECK(gradcheck(mm, {rnd({2, 3, 4}, 15, true), rnd({4, 2}, 16, true)}));  // shared weight path
  CHECK(gradcheck(mm, {rnd({2, 3, 4}, 17, true), rnd({4}, 18, true)}));
  CHECK(gradcheck(mm, {rnd({4}, 19, true), rnd({2, 4, 3}, 20, true)}));
  Tensor at = rnd({2, 4, 3}, 21).transpose(1, 2);  // (2, 3, 4), non-contiguous batch
  at.set_requires_grad(true);
  CHECK(gradcheck(mm, {at, rnd({4, 2}, 22, true)}));
}

TEST_CASE("matmul gradient of a shared weight sums over the batch", "[autograd][matmul]") {
  Tensor a = rnd({2, 3, 4}, 23, true), w = rnd({4, 5}, 24, true);
  autograd::backward({sum(matmul(a, w))});
  // d/dw sum(a @ w) = sum over batch and rows of a, broadcast over the N columns.
  Tensor expected = sum(a.detach(), {0, 1}).reshape({4, 1}).expand({4, 5});
  require_close(w.grad(), expected, 1e-5, 1e-5);
}

TEST_CASE("linear matches matmul plus bias over leading dims", "[autograd][linear]") {
  Tensor x = rnd({2, 3, 4}, 30), w = rnd({5, 4}, 31), b = rnd({5}, 32);
  Tensor y = linear(x, w, b);
  REQUIRE(y.shape() == Shape{2, 3, 5});
  require_close(y, add(matmul(x, transpose(w, 0, 1)), b), 1e-5, 1e-5);
  require_close(linear(x, w), matmul(x, transpose(w, 0, 1)), 1e-5, 1e-5);
  CHECK(linear(rnd({4}, 33), w, b).shape() == Shape{5});
  Tensor xt = rnd({4, 3}, 34).transpose(0, 1);  // (3, 4) non-contiguous
  require_close(linear(xt, w, b), linear(xt.contiguous(), w, b), 1e-6, 1e-6);
}

TEST_CASE("linear rejects mismatched shapes", "[autograd][linear]") {
  REQUIRE_THROWS_WITH(linear(rnd({2, 3}, 1), rnd({5, 4}, 2)), Catch::Contains("[linear] expected x (..., 4)"));
  REQUIRE_THROWS_WITH(linear(rnd({2, 4}, 1), rnd({5, 4}, 2), rnd({4}, 3)),
                      Catch::Contains("[linear] expected bias (5), got (4)"));
  REQUIRE_THROWS_WITH(linear(rnd({2, 4}, 1), rnd({4}, 2)), Catch::Contains("expected weight (out, in)"));
}

TEST_CASE("linear gradients: x, weight and bias", "[autograd][linear][gradcheck]") {
  auto lin = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  auto lin_nb = [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); };
  CHECK(gradcheck(lin, {rnd({2, 3, 4}, 40, true), rnd({5, 4}, 41, true), rnd({5}, 42, true)}));
  CHECK(gradcheck(lin_nb, {rnd({3, 4}, 43, true), rnd({2, 4}, 44, true)}));
  CHECK(gradcheck(lin, {rnd({4}, 45, true), rnd({3, 4}, 46, true), rnd({3}, 47, true)}));
  Tensor xt = rnd({2, 4, 3}, 48).transpose(1, 2);  // (2, 3, 4), not viewable as (6, 4)
  xt.set_requires_grad(true);
  Tensor wt = rnd({4, 5}, 49).transpose(0, 1);  // (5, 4)
  wt.set_requires_grad(true);
  CHECK(gradcheck(lin, {xt, wt, rnd({5}, 50, true)}));
}

TEST_CASE("linear weight and bias gradients sum over all rows", "[autograd][linear]") {
  Tensor x = rnd({2, 3, 4}, 51), w = rnd({5, 4}, 52, true), b = rnd({5}, 53, true);
  Tensor g = rnd({2, 3, 5}, 54);
  autograd::backward({linear(x, w, b)}, {g});
  Tensor g2 = g.reshape({6, 5}), x2 = x.reshape({6, 4});
  require_close(w.grad(), matmul(transpose(g2, 0, 1), x2), 1e-5, 1e-5);
  require_close(b.grad(), sum(g2, {0}), 1e-5, 1e-5);
}

TEST_CASE("matmul and linear backwards are differentiable (create_graph)", "[autograd][matmul][gradcheck]") {
  // fn returns d(sum(w * op(a, b)))/da, itself a function of b: its gradient checks the double backward.
  auto first_grad = [](bool use_linear) {
    return [use_linear](const std::vector<Tensor>& in) {
      Tensor a = in[0].detach();
      a.set_requires_grad(true);
      Tensor y = use_linear ? linear(a, in[1]) : matmul(a, in[1]);
      Tensor w = rnd(y.shape(), 99);
      return autograd::grad({sum(mul(y, w))}, {a}, {}, {.create_graph = true})[0];
    };
  };
  CHECK(gradcheck(first_grad(false), {rnd({2, 3, 4}, 60), rnd({4, 2}, 61, true)}));
  CHECK(gradcheck(first_grad(true), {rnd({2, 3, 4}, 62), rnd({5, 4}, 63, true)}));
}
