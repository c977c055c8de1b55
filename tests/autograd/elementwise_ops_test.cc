// Element-wise ops: forward values, dtype promotion, broadcasting, input errors and gradients
// (finite differences, including broadcast and non-contiguous inputs).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/ops.h"
#include "tests/testing/compare.h"
#include "tests/testing/gradcheck.h"

using namespace tessera;
using tessera::testing::gradcheck;
using tessera::testing::require_close;
using tessera::testing::to_doubles;
using Inputs = std::vector<Tensor>;

namespace {
Generator g_gen(7);

// from_vector converts to opts.dtype (f32 by default): these keep the host type.
Tensor bools(const std::vector<bool>& v, const Shape& s) { return from_vector<bool>(v, s, {.dtype = DType::b8}); }
Tensor i32s(const std::vector<int32_t>& v, const Shape& s) { return from_vector<int32_t>(v, s, {.dtype = DType::i32}); }
Tensor i64s(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s, {.dtype = DType::i64}); }

Tensor rand_leaf(Shape shape, double lo = -1.0, double hi = 1.0) {
  Tensor t = empty(shape);
  uniform_(t, lo, hi, &g_gen);
  t.set_requires_grad(true);
  return t;
}

// A (rows, cols) leaf whose memory is transposed: non-contiguous.
Tensor transposed_leaf(int64_t rows, int64_t cols, double lo = -1.0, double hi = 1.0) {
  Tensor base = empty({cols, rows});
  uniform_(base, lo, hi, &g_gen);
  Tensor t = base.transpose(0, 1);
  REQUIRE_FALSE(t.is_contiguous());
  t.set_requires_grad(true);
  return t;
}

// A leaf that is every other column of a wider tensor: non-contiguous.
Tensor sliced_leaf(int64_t rows, int64_t cols, double lo = -1.0, double hi = 1.0) {
  Tensor base = empty({rows, 2 * cols});
  uniform_(base, lo, hi, &g_gen);
  Tensor t = base.slice(1, 0, 2 * cols, 2);
  t.set_requires_grad(true);
  return t;
}
}  // namespace

TEST_CASE("elementwise: forward values with broadcasting", "[autograd][elementwise]") {
  Tensor a = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector({10, 20, 30}, {3});
  Tensor c = from_vector({2, 4}, {2, 1});
  require_close(add(a, b), from_vector({11, 22, 33, 14, 25, 36}, {2, 3}), 0, 0);
  require_close(sub(a, c), from_vector({-1, 0, 1, 0, 1, 2}, {2, 3}), 0, 0);
  require_close(mul(b, c), from_vector({20, 40, 60, 40, 80, 120}, {2, 3}), 0, 0);
  require_close(div(a, c), from_vector({0.5, 1, 1.5, 1, 1.25, 1.5}, {2, 3}), 1e-7, 0);
  require_close(pow(c, a), from_vector({2, 4, 8, 256, 1024, 4096}, {2, 3}), 1e-6, 0);
  require_close(maximum(a, c), from_vector({2, 2, 3, 4, 5, 6}, {2, 3}), 0, 0);
  require_close(minimum(a, c), from_vector({1, 2, 2, 4, 4, 4}, {2, 3}), 0, 0);
  require_close(a * 2.0 + 1.0, from_vector({3, 5, 7, 9, 11, 13}, {2, 3}), 0, 0);
  require_close(1.0 - b / 10.0, from_vector({0, -1, -2}, {3}), 0, 0);
  require_close(12.0 / c, from_vector({6, 3}, {2, 1}), 0, 0);
  require_close(-b, from_vector({-10, -20, -30}, {3}), 0, 0);
  require_close(pow(b, 2.0), from_vector({100, 400, 900}, {3}), 0, 0);
}

TEST_CASE("elementwise: unary forward values", "[autograd][elementwise]") {
  Tensor x = from_vector({-2.0f, -0.5f, 0.0f, 0.5f, 2.0f}, {5});
  std::vector<double> v = to_doubles(x);
  auto expect = [&](const Tensor& got, double (*f)(double), double tol = 1e-6) {
    std::vector<double> e;
    for (double xi : v) e.push_back(f(xi));
    require_close(got, from_vector(std::vector<float>(e.begin(), e.end()), {5}), tol, tol);
  };
  expect(exp(x), [](double t) { return std::exp(t); });
  expect(tanh(x), [](double t) { return std::tanh(t); });
  expect(sigmoid(x), [](double t) { return 1.0 / (1.0 + std::exp(-t)); });
  expect(relu(x), [](double t) { return t > 0 ? t : 0.0; });
  expect(abs(x), [](double t) { return std::fabs(t); });
  expect(square(x), [](double t) { return t * t; });
  expect(sin(x), [](double t) { return std::sin(t); });
  expect(cos(x), [](double t) { return std::cos(t); });
  expect(silu(x), [](double t) { return t / (1.0 + std::exp(-t)); });
  expect(gelu(x, "none"), [](double t) { return 0.5 * t * (1.0 + std::erf(t / std::sqrt(2.0))); });
  expect(gelu(x, "tanh"), [](double t) {
    return 0.5 * t * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (t + 0.044715 * t * t * t)));
  });
  expect(sign(x), [](double t) { return double((t > 0) - (t < 0)); });
  Tensor p = from_vector({0.25f, 1.0f, 4.0f}, {3});
  require_close(sqrt(p), from_vector({0.5, 1, 2}, {3}), 1e-7, 0);
  require_close(rsqrt(p), from_vector({2, 1, 0.5}, {3}), 1e-6, 0);
  require_close(reciprocal(p), from_vector({4, 1, 0.25}, {3}), 1e-7, 0);
  require_close(log(p), from_vector({std::log(0.25f), 0.0f, std::log(4.0f)}, {3}), 1e-6, 0);
}

TEST_CASE("elementwise: dtype promotion", "[autograd][elementwise]") {
  Tensor i32 = i32s({1, 2, 3}, {3});
  Tensor i64 = i64s({4, 5, 6}, {3});
  Tensor f32 = from_vector({0.5f, 0.5f, 0.5f}, {3});
  Tensor bf = f32.to(DType::bf16);
  REQUIRE(add(i32, f32).dtype() == DType::f32);
  REQUIRE(add(i32, i64).dtype() == DType::i64);
  REQUIRE(add(bf, f32).dtype() == DType::f32);
  REQUIRE(add(bf, i64).dtype() == DType::bf16);
  REQUIRE(mul(i32, 2.0).dtype() == DType::i32);
  REQUIRE(mul(i32, 0.5).dtype() == DType::f32);
  REQUIRE(mul(bf, 3.0).dtype() == DType::bf16);
  require_close(div(i32, i32s({2, 2, 2}, {3})), from_vector({0.5, 1, 1.5}, {3}), 0, 0);
  REQUIRE(exp(i64).dtype() == DType::f32);
  require_close(sqrt(i64s({4, 9}, {2})), from_vector({2, 3}, {2}), 1e-7, 0);
  REQUIRE(abs(i32).dtype() == DType::i32);
  REQUIRE(eq(i32, f32).dtype() == DType::b8);
  require_close(lt(i32, from_vector({1.5f, 1.5f, 3.5f}, {3})), bools({true, false, true}, {3}), 0, 0);
}

TEST_CASE("elementwise: comparisons and logic", "[autograd][elementwise]") {
  Tensor a = from_vector({1, 2, 3}, {3});
  Tensor b = from_vector({2, 2, 2}, {3});
  require_close(eq(a, b), bools({false, true, false}, {3}), 0, 0);
  require_close(ne(a, b), bools({true, false, true}, {3}), 0, 0);
  require_close(le(a, b), bools({true, true, false}, {3}), 0, 0);
  require_close(gt(a, b), bools({false, false, true}, {3}), 0, 0);
  require_close(ge(a, b), bools({false, true, true}, {3}), 0, 0);
  Tensor p = bools({true, true, false, false}, {4});
  Tensor q = bools({true, false, true, false}, {4});
  require_close(logical_and(p, q), bools({true, false, false, false}, {4}), 0, 0);
  require_close(logical_or(p, q), bools({true, true, true, false}, {4}), 0, 0);
  require_close(logical_not(p), bools({false, false, true, true}, {4}), 0, 0);
  // Non-differentiable: nothing recorded even for inputs that require grad.
  Tensor x = rand_leaf({3});
  REQUIRE_FALSE(gt(x, a).requires_grad());
  REQUIRE_FALSE(sign(x).requires_grad());
}

TEST_CASE("elementwise: bad inputs are refused with their shapes", "[autograd][elementwise]") {
  Tensor a = zeros({2, 3}), b = zeros({4, 3});
  REQUIRE_THROWS_WITH(add(a, b), "[add] expected broadcastable shapes, got (2, 3) and (4, 3)");
  REQUIRE_THROWS_WITH(mul(a, zeros({3, 2})), Catch::Contains("[mul] expected broadcastable shapes, got (2, 3) and (3, 2)"));
  REQUIRE_THROWS_WITH(eq(a, b), Catch::Contains("[eq] expected broadcastable shapes"));
  Tensor m = zeros({2, 3}, {.dtype = DType::b8});
  REQUIRE_THROWS_WITH(add(m, m), Catch::Contains("[add] expected numeric operands"));
  REQUIRE_THROWS_WITH(where(a, a, a), Catch::Contains("[where] expected a bool condition"));
  REQUIRE_THROWS_WITH(where(m, a, b), Catch::Contains("[where] expected broadcastable shapes"));
  REQUIRE_THROWS_WITH(masked_fill(zeros({3}), m, 1.0), Catch::Contains("[masked_fill]"));
  REQUIRE_THROWS_WITH(clamp(a, 1.0, 0.0), Catch::Contains("[clamp] expected lo <= hi"));
  REQUIRE_THROWS_WITH(gelu(a, "fast"), Catch::Contains("[gelu] expected approximate"));
  REQUIRE_THROWS_WITH(add(a, Tensor()), Catch::Contains("[add] expected a defined tensor"));
  REQUIRE_THROWS_WITH(add_(zeros({3}), zeros({2, 3})), Catch::Contains("[add_] expected other broadcastable to (3)"));
  // Devices: a CUDA tensor cannot be created on this machine, so the device check is not reachable here.
}

TEST_CASE("elementwise: binary gradients with broadcasting", "[autograd][elementwise]") {
  auto binary_fns = std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>>{
      {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"maximum", maximum}, {"minimum", minimum}};
  for (auto [name, f] : binary_fns) {
    INFO(name);
    auto fn = [f = f](const Inputs& in) { return f(in[0], in[1]); };
    CHECK(gradcheck(fn, {rand_leaf({2, 3}), rand_leaf({2, 3}, 0.5, 2.0)}));
    CHECK(gradcheck(fn, {rand_leaf({2, 3}), rand_leaf({3}, 0.5, 2.0)}));
    CHECK(gradcheck(fn, {rand_leaf({2, 1}), rand_leaf({1, 3}, 0.5, 2.0)}));
    CHECK(gradcheck(fn, {transposed_leaf(2, 3), sliced_leaf(2, 3, 0.5, 2.0)}));
    // Only one side requires grad.
    Tensor fixed = empty({3});
    uniform_(fixed, 0.5, 2.0, &g_gen);
    CHECK(gradcheck(fn, {rand_leaf({2, 3}), fixed}));
  }
  auto pow_fn = [](const Inputs& in) { return pow(in[0], in[1]); };
  CHECK(gradcheck(pow_fn, {rand_leaf({2, 3}, 0.5, 2.0), rand_leaf({3}, -1.5, 2.0)}));
}

TEST_CASE("elementwise: maximum splits the gradient on ties", "[autograd][elementwise]") {
  Tensor a = from_vector({1, 2}, {2}), b = from_vector({1, 3}, {2});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  autograd::backward({sum(maximum(a, b))});
  require_close(a.grad(), from_vector({0.5, 0}, {2}), 0, 0);
  require_close(b.grad(), from_vector({0.5, 1}, {2}), 0, 0);
}

TEST_CASE("elementwise: scalar-operand gradients", "[autograd][elementwise]") {
  CHECK(gradcheck([](const Inputs& in) { return 3.0 - in[0] * 2.0 + 1.5; }, {rand_leaf({2, 3})}));
  CHECK(gradcheck([](const Inputs& in) { return 2.0 / in[0] - in[0] / 4.0; }, {rand_leaf({4}, 0.5, 2.0)}));
  for (double p : {0.0, 1.0, 2.0, 3.0, -1.5, 0.5})
    CHECK(gradcheck([p](const Inputs& in) { return pow(in[0], p); }, {transposed_leaf(2, 3, 0.5, 2.0)}));
}

TEST_CASE("elementwise: unary gradients", "[autograd][elementwise]") {
  using Fn = Tensor (*)(const Tensor&);
  // Inputs away from kinks (abs, relu at 0).
  std::vector<std::pair<const char*, Fn>> anywhere = {
      {"neg", neg}, {"exp", exp}, {"square", square}, {"sin", sin}, {"cos", cos},
      {"tanh", tanh}, {"sigmoid", sigmoid}, {"silu", silu}};
  for (auto [name, f] : anywhere) {
    INFO(name);
    CHECK(gradcheck([f = f](const Inputs& in) { return f(in[0]); }, {rand_leaf({2, 3}, -2.0, 2.0)}));
    CHECK(gradcheck([f = f](const Inputs& in) { return f(in[0]); }, {transposed_leaf(3, 2, -2.0, 2.0)}));
  }
  std::vector<std::pair<const char*, Fn>> positive = {
      {"log", log}, {"sqrt", sqrt}, {"rsqrt", rsqrt}, {"reciprocal", reciprocal}};
  for (auto [name, f] : positive) {
    INFO(name);
    CHECK(gradcheck([f = f](const Inputs& in) { return f(in[0]); }, {sliced_leaf(2, 3, 0.5, 2.0)}));
  }
  Tensor away = from_vector({-1.5f, -0.7f, -0.2f, 0.3f, 0.9f, 1.8f}, {2, 3});
  away.set_requires_grad(true);
  CHECK(gradcheck([](const Inputs& in) { return abs(in[0]); }, {away}));
  CHECK(gradcheck([](const Inputs& in) { return relu(in[0]); }, {away}));
  CHECK(gradcheck([](const Inputs& in) { return gelu(in[0], "tanh"); }, {rand_leaf({2, 3}, -3.0, 3.0)}));
  CHECK(gradcheck([](const Inputs& in) { return gelu(in[0], "none"); }, {rand_leaf({2, 3}, -3.0, 3.0)}));
  // sign has zero gradient: nothing is recorded, so use it as a constant factor.
  CHECK(gradcheck([](const Inputs& in) { return mul(in[0], sign(in[0])); }, {away}));
}

TEST_CASE("elementwise: where, masked_fill and clamp gradients", "[autograd][elementwise]") {
  Tensor cond = bools({true, false, true, false, false, true}, {2, 3});
  CHECK(gradcheck([&](const Inputs& in) { return where(cond, in[0], in[1]); },
                  {rand_leaf({2, 3}), rand_leaf({3})}));
  CHECK(gradcheck([&](const Inputs& in) { return where(cond.select(0, 0), in[0], in[1]); },
                  {rand_leaf({2, 1}), transposed_leaf(2, 3)}));
  require_close(where(cond, from_vector({1, 2, 3, 4, 5, 6}, {2, 3}), zeros({})),
                from_vector({1, 0, 3, 0, 0, 6}, {2, 3}), 0, 0);
  Tensor mask = bools({false, true, false}, {3});
  CHECK(gradcheck([&](const Inputs& in) { return masked_fill(in[0], mask, -5.0); }, {rand_leaf({2, 3})}));
  require_close(masked_fill(ones({2, 3}), mask, -5.0), from_vector({1, -5, 1, 1, -5, 1}, {2, 3}), 0, 0);
  Tensor x = from_vector({-2.0f, -0.6f, 0.1f, 0.4f, 0.8f, 3.0f}, {2, 3});
  x.set_requires_grad(true);
  require_close(clamp(x, -0.5, 0.5), from_vector({-0.5, -0.5, 0.1, 0.4, 0.5, 0.5}, {2, 3}), 0, 0);
  require_close(clamp(x, std::nullopt, 0.0), from_vector({-2, -0.6, 0, 0, 0, 0}, {2, 3}), 0, 0);
  CHECK(gradcheck([](const Inputs& in) { return clamp(in[0], -0.5, 0.5); }, {x}));
  CHECK(gradcheck([](const Inputs& in) { return clamp(in[0], 0.0, std::nullopt); }, {x}));
  REQUIRE(clamp(i32s({-3, 3}, {2}), -1.5, std::nullopt).dtype() == DType::f32);
}

TEST_CASE("elementwise: a mixed-dtype op returns the gradient in the input's dtype", "[autograd][elementwise]") {
  Tensor a = from_vector({1, 2}, {2}, {.dtype = DType::bf16});
  a.set_requires_grad(true);
  Tensor b = from_vector({3, 4}, {2});
  Tensor y = mul(a, b);
  REQUIRE(y.dtype() == DType::f32);
  autograd::backward({sum(y)});
  REQUIRE(a.grad().dtype() == DType::bf16);
  require_close(a.grad(), from_vector({3, 4}, {2}), 0, 0);
}

TEST_CASE("elementwise: in-place add_ broadcasts and gradchecks", "[autograd][elementwise]") {
  Tensor t = zeros({2, 3});
  add_(t, from_vector({1, 2, 3}, {3}), 2.0);
  require_close(t, from_vector({2, 4, 6, 2, 4, 6}, {2, 3}), 0, 0);
  mul_(t, 0.5);
  require_close(t, from_vector({1, 2, 3, 1, 2, 3}, {2, 3}), 0, 0);
  CHECK(gradcheck(
      [](const Inputs& in) {
        Tensor a = mul(in[0], 1.0);
        add_(a, in[1], -3.0);
        mul_(a, 2.0);
        return a;
      },
      {rand_leaf({2, 3}), rand_leaf({3})}));
}
