// Global-norm clipping: the norm across tensors, scaling only above max_norm, 16-bit grads,
// non-finite norms reported without scaling, and the reduction hook.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/factory.h"
#include "optim/clip_grad.h"
#include "tests/testing/compare.h"

namespace {

using namespace tessera;

std::vector<Tensor> params_with_grads(std::vector<std::vector<float>> grads) {
  std::vector<Tensor> ps;
  for (auto& g : grads) {
    Tensor p = zeros({int64_t(g.size())}).set_requires_grad(true);
    p.set_grad(from_vector(g, {int64_t(g.size())}));
    ps.push_back(p);
  }
  return ps;
}

TEST_CASE("clip_grad_norm computes the global norm and scales above max_norm", "[optim][clip]") {
  // Norm: sqrt(9 + 16 + 144) = 13 across two tensors; a third parameter has no grad.
  auto ps = params_with_grads({{3.0f, 4.0f}, {12.0f}});
  ps.push_back(zeros({3}).set_requires_grad(true));
  CHECK(optim::grad_sq_sum(ps) == 169.0);
  const double norm = optim::clip_grad_norm(ps, 6.5);
  CHECK(norm == Approx(13.0).epsilon(1e-12));
  const double coef = 6.5 / (13.0 + 1e-6);
  testing::require_close(ps[0].grad(), from_vector(std::vector<float>{float(3 * coef), float(4 * coef)}, {2}),
                         1e-6, 0.0);
  testing::require_close(ps[1].grad(), from_vector(std::vector<float>{float(12 * coef)}, {1}), 1e-6, 0.0);
  CHECK(std::sqrt(optim::grad_sq_sum(ps)) == Approx(6.5).epsilon(1e-6));
  CHECK_FALSE(ps[2].grad().defined());
}

TEST_CASE("clip_grad_norm leaves grads below max_norm untouched", "[optim][clip]") {
  auto ps = params_with_grads({{0.3f, -0.4f}});
  CHECK(optim::clip_grad_norm(ps, 1.0) == Approx(0.5));
  testing::require_close(ps[0].grad(), from_vector(std::vector<float>{0.3f, -0.4f}, {2}), 0.0, 0.0);
}

TEST_CASE("clip_grad_norm over many elements and 16-bit grads", "[optim][clip]") {
  Generator gen(11);
  Tensor p = zeros({300, 257}).set_requires_grad(true);
  p.set_grad(randn({300, 257}, {.dtype = DType::bf16}, &gen));
  const std::vector<double> g = testing::to_doubles(p.grad());
  double sq = 0.0;
  for (double v : g) sq += v * v;
  const double norm = optim::clip_grad_norm({p}, 1.0);
  CHECK(norm == Approx(std::sqrt(sq)).epsilon(1e-12));
  CHECK(p.grad().dtype() == DType::bf16);
  CHECK(std::sqrt(optim::grad_sq_sum({p})) == Approx(1.0).epsilon(1e-2));  // bf16 rounding of each element
}

TEST_CASE("a non-finite norm is returned and nothing is scaled", "[optim][clip]") {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto ps = params_with_grads({{1.0f, bad}, {5.0f}});
    const double norm = optim::clip_grad_norm(ps, 1.0);
    CHECK_FALSE(std::isfinite(norm));
    CHECK(testing::to_doubles(ps[1].grad())[0] == 5.0);
    CHECK(testing::to_doubles(ps[0].grad())[0] == 1.0);
  }
}

TEST_CASE("the reducer sees the local sum of squares and its result sets the norm", "[optim][clip]") {
  auto ps = params_with_grads({{3.0f, 4.0f}});
  double seen = 0.0;
  // As if a second rank held squares summing to 75: global norm 10.
  const double norm = optim::clip_grad_norm(ps, 5.0, [&](double local) {
    seen = local;
    return local + 75.0;
  });
  CHECK(seen == 25.0);
  CHECK(norm == Approx(10.0));
  CHECK(testing::to_doubles(ps[0].grad())[0] == Approx(1.5).epsilon(1e-6));
  CHECK_THROWS_AS(optim::clip_grad_norm(ps, 0.0), ValueError);
}

TEST_CASE("scale_grads averages accumulated micro-batch gradients", "[optim][clip]") {
  auto ps = params_with_grads({{4.0f, -8.0f}});
  optim::scale_grads(ps, 0.25);
  testing::require_close(ps[0].grad(), from_vector(std::vector<float>{1.0f, -2.0f}, {2}), 0.0, 0.0);
}

}  // namespace
