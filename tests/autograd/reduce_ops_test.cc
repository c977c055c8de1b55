// Reductions: values over chosen dims with and without keepdim, dtypes, errors and gradients
// (finite differences, including non-contiguous inputs), and sum_to.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/ops.h"
#include "tests/testing/compare.h"
#include "tests/testing/gradcheck.h"

using namespace tessera;
using tessera::testing::gradcheck;
using tessera::testing::require_close;
using Inputs = std::vector<Tensor>;

namespace {
Generator g_gen(11);

Tensor rand_leaf(Shape shape, double lo = -1.0, double hi = 1.0) {
  Tensor t = empty(shape);
  uniform_(t, lo, hi, &g_gen);
  t.set_requires_grad(true);
  return t;
}

// (2, 3, 4) seen through a permutation of (4, 2, 3) memory: non-contiguous.
Tensor permuted_leaf() {
  Tensor base = empty({4, 2, 3});
  uniform_(base, -1.0, 1.0, &g_gen);
  Tensor t = base.permute({1, 2, 0});
  t.set_requires_grad(true);
  return t;
}

Tensor i64s(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s, {.dtype = DType::i64}); }
}  // namespace

TEST_CASE("reduce: values over dims and keepdim", "[autograd][reduce]") {
  Tensor x = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  require_close(sum(x), scalar_tensor(21), 0, 0);
  REQUIRE(sum(x).dim() == 0);
  require_close(sum(x, {0}), from_vector({5, 7, 9}, {3}), 0, 0);
  require_close(sum(x, {-1}, true), from_vector({6, 15}, {2, 1}), 0, 0);
  require_close(mean(x, {1}), from_vector({2, 5}, {2}), 0, 0);
  require_close(amax(x, {0}), from_vector({4, 5, 6}, {3}), 0, 0);
  require_close(amin(x, {1}, true), from_vector({1, 4}, {2, 1}), 0, 0);
  require_close(argmax(x, 1), i64s({2, 2}, {2}), 0, 0);
  require_close(argmin(x, 0, true), i64s({0, 0, 0}, {1, 3}), 0, 0);
  require_close(var(x, {1}), from_vector({1, 1}, {2}), 1e-6, 0);
  require_close(var(x, {1}, 0), from_vector({2.0f / 3, 2.0f / 3}, {2}), 1e-6, 0);
  require_close(tessera::std(x, {0}), full({3}, std::sqrt(4.5)), 1e-6, 0);
  require_close(norm(x), scalar_tensor(std::sqrt(91.0)), 1e-6, 0);
  require_close(norm(x, 1.0, {1}), from_vector({6, 15}, {2}), 1e-6, 0);
  require_close(norm(x, INFINITY, {0}), from_vector({4, 5, 6}, {3}), 0, 0);
  require_close(norm(x, 3.0, {1}), from_vector({std::cbrt(36.0f), std::cbrt(405.0f)}, {2}), 1e-5, 0);
  require_close(sum(x, {0, 1}, true), from_vector({21}, {1, 1}), 0, 0);
}

TEST_CASE("reduce: dtypes", "[autograd][reduce]") {
  Tensor i = from_vector<int32_t>({1, 2, 3}, {3}, {.dtype = DType::i32});
  REQUIRE(sum(i).dtype() == DType::i64);
  require_close(sum(i), i64s({6}, {}), 0, 0);
  REQUIRE(mean(i).dtype() == DType::f32);
  require_close(mean(i), scalar_tensor(2), 0, 0);
  REQUIRE(amax(i).dtype() == DType::i32);
  REQUIRE(argmax(from_vector({1, 3, 2}, {3}), 0).dtype() == DType::i64);
  Tensor h = from_vector({1, 2, 3, 4}, {4}, {.dtype = DType::bf16});
  REQUIRE(sum(h).dtype() == DType::bf16);
  require_close(sum(h), scalar_tensor(10), 0, 0);
}

TEST_CASE("reduce: bad dims are refused", "[autograd][reduce]") {
  Tensor x = zeros({2, 3});
  REQUIRE_THROWS_WITH(sum(x, {2}), Catch::Contains("[sum] expected dim in [-2, 1], got 2"));
  REQUIRE_THROWS_WITH(mean(x, {0, -2}), Catch::Contains("[mean] expected distinct dims"));
  REQUIRE_THROWS_WITH(argmax(x, -3), Catch::Contains("[argmax] expected dim in [-2, 1], got -3"));
  REQUIRE_THROWS_WITH(norm(x, 0.0), Catch::Contains("[norm] expected p > 0"));
  REQUIRE_THROWS_WITH(amax(empty({0, 3})), Catch::Contains("[amax] expected a non-empty tensor"));
  REQUIRE_THROWS_WITH(sum_to(x, {4}), Catch::Contains("[sum_to]"));
  REQUIRE_THROWS_WITH(var(x, {}, -1), Catch::Contains("[var] expected a non-negative correction"));
}

TEST_CASE("reduce: gradients", "[autograd][reduce]") {
  using Fn = std::function<Tensor(const Tensor&)>;
  std::vector<std::pair<const char*, Fn>> fns = {
      {"sum all", [](const Tensor& x) { return sum(x); }},
      {"sum dims", [](const Tensor& x) { return sum(x, {0, 2}); }},
      {"sum keepdim", [](const Tensor& x) { return sum(x, {1}, true); }},
      {"mean", [](const Tensor& x) { return mean(x, {-1}); }},
      {"mean all", [](const Tensor& x) { return mean(x); }},
      {"amax", [](const Tensor& x) { return amax(x, {1}); }},
      {"amin", [](const Tensor& x) { return amin(x, {0, 2}, true); }},
      {"var", [](const Tensor& x) { return var(x, {2}); }},
      {"var biased", [](const Tensor& x) { return var(x, {0, 1}, 0, true); }},
      {"std", [](const Tensor& x) { return tessera::std(x, {2}); }},
      {"std all", [](const Tensor& x) { return tessera::std(x); }},
      {"norm 2", [](const Tensor& x) { return norm(x, 2.0, {2}); }},
      {"norm 1", [](const Tensor& x) { return norm(x, 1.0, {1}); }},
      {"norm 3", [](const Tensor& x) { return norm(x, 3.0); }},
      {"norm inf", [](const Tensor& x) { return norm(x, INFINITY, {0}); }},
  };
  for (auto& [name, f] : fns) {
    INFO(name);
    CHECK(gradcheck([f = f](const Inputs& in) { return f(in[0]); }, {rand_leaf({2, 3, 4})}));
    CHECK(gradcheck([f = f](const Inputs& in) { return f(in[0]); }, {permuted_leaf()}));
  }
}

TEST_CASE("reduce: amax shares the gradient among ties", "[autograd][reduce]") {
  Tensor x = from_vector({1, 3, 3, 2}, {4});
  x.set_requires_grad(true);
  autograd::backward({amax(x)});
  require_close(x.grad(), from_vector({0, 0.5, 0.5, 0}, {4}), 0, 0);
  REQUIRE_FALSE(argmax(x, 0).requires_grad());
}

TEST_CASE("reduce: sum_to undoes broadcasting", "[autograd][reduce]") {
  Tensor x = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  require_close(sum_to(x, {3}), from_vector({5, 7, 9}, {3}), 0, 0);
  require_close(sum_to(x, {2, 1}), from_vector({6, 15}, {2, 1}), 0, 0);
  require_close(sum_to(x, {}), scalar_tensor(21), 0, 0);
  require_close(sum_to(x, {1, 3}), from_vector({5, 7, 9}, {1, 3}), 0, 0);
  CHECK(gradcheck([](const Inputs& in) { return sum_to(in[0], {3, 1}); }, {rand_leaf({2, 3, 4})}));
}

TEST_CASE("reduce: second derivative of std", "[autograd][reduce]") {
  // create_graph through std's backward: its gradient is checked against finite differences.
  Tensor x = rand_leaf({5});
  CHECK(gradcheck(
      [](const Inputs& in) {
        return autograd::grad({tessera::std(in[0])}, {in[0]}, {}, {.create_graph = true})[0];
      },
      {x}, {.atol = 2e-3, .rtol = 2e-2}));
}
