// cross_entropy: values against a hand loop (ignore_index, label smoothing, every reduction),
// finite-difference gradients, and the target range check.
#include <catch2/catch.hpp>
#include <cmath>

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

Tensor targets_of(const std::vector<int64_t>& t, const Shape& shape) {
  return from_vector(t, shape, {.dtype = DType::i64});
}

// Per-row loss in double: (1 - s) * (lse - x[t]) + s * mean_v(lse - x[v]); 0 for ignored rows.
std::vector<double> ref_losses(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore,
                               double s) {
  const int64_t v = logits.size(-1);
  std::vector<double> x = to_doubles(logits), out;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] == ignore) {
      out.push_back(0.0);
      continue;
    }
    const double* row = x.data() + i * size_t(v);
    double mx = row[0], z = 0.0, mean_x = 0.0;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, row[j]);
    for (int64_t j = 0; j < v; ++j) {
      z += std::exp(row[j] - mx);
      mean_x += row[j] / double(v);
    }
    const double lse = mx + std::log(z);
    out.push_back((1.0 - s) * (lse - row[targets[i]]) + s * (lse - mean_x));
  }
  return out;
}

}  // namespace

TEST_CASE("cross_entropy matches a hand loop for every reduction", "[autograd][cross_entropy]") {
  Tensor logits = rnd({4, 6}, 1);
  std::vector<int64_t> t = {2, 0, 5, 3};
  Tensor tg = targets_of(t, {4});
  std::vector<double> ref = ref_losses(logits, t, -100, 0.0);
  Tensor none = cross_entropy(logits, tg, {.reduction = "none"});
  REQUIRE(none.shape() == Shape{4});
  CHECK(none.dtype() == DType::f32);
  require_close(none, from_vector(std::vector<float>(ref.begin(), ref.end()), {4}), 1e-5, 1e-5);
  double total = ref[0] + ref[1] + ref[2] + ref[3];
  CHECK(cross_entropy(logits, tg, {.reduction = "sum"}).item() == Approx(total).epsilon(1e-5));
  CHECK(cross_entropy(logits, tg).item() == Approx(total / 4).epsilon(1e-5));
  // The same against the composition -log_softmax gathered at the targets.
  Tensor nll = neg(gather(log_softmax(logits, -1), 1, tg.reshape({4, 1})));
  require_close(none, nll.reshape({4}), 1e-5, 1e-5);
}

TEST_CASE("cross_entropy on bf16 logits gives an f32 loss and bf16 gradients", "[autograd][cross_entropy]") {
  Tensor logits = rnd({4, 6}, 5);
  Tensor tg = targets_of({2, 0, 5, 3}, {4});
  Tensor lb = logits.to(DType::bf16);
  lb.set_requires_grad(true);
  Tensor loss = cross_entropy(lb, tg);
  CHECK(loss.dtype() == DType::f32);
  CHECK(loss.item() == Approx(cross_entropy(logits, tg).item()).epsilon(2e-2));
  autograd::backward({loss});
  REQUIRE(lb.grad().dtype() == DType::bf16);
  Tensor l32 = logits.detach();
  l32.set_requires_grad(true);
  autograd::backward({cross_entropy(l32, tg)});
  require_close(lb.grad(), l32.grad(), 5e-2, 5e-3);
}

TEST_CASE("cross_entropy on (B, T, V) logits with label smoothing", "[autograd][cross_entropy]") {
  Tensor logits = rnd({2, 3, 5}, 2);
  std::vector<int64_t> t = {0, 4, 1, 2, 3, 3};
  Tensor tg = targets_of(t, {2, 3});
  std::vector<double> ref = ref_losses(logits, t, -100, 0.1);
  Tensor none = cross_entropy(logits, tg, {.label_smoothing = 0.1, .reduction = "none"});
  REQUIRE(none.shape() == Shape{2, 3});
  require_close(none, from_vector(std::vector<float>(ref.begin(), ref.end()), {2, 3}), 1e-5, 1e-5);
}

TEST_CASE("cross_entropy: ignored targets contribute nothing and mean counts the rest",
          "[autograd][cross_entropy]") {
  Tensor logits = rnd({5, 4}, 3, true);
  std::vector<int64_t> t = {1, -100, 3, -100, 0};
  Tensor tg = targets_of(t, {5});
  std::vector<double> ref = ref_losses(logits.detach(), t, -100, 0.0);
  Tensor none = cross_entropy(logits, tg, {.reduction = "none"});
  CHECK(none.select(0, 1).item() == 0.0);
  CHECK(none.select(0, 3).item() == 0.0);
  Tensor loss = cross_entropy(logits, tg);
  CHECK(loss.item() == Approx((ref[0] + ref[2] + ref[4]) / 3.0).epsilon(1e-5));
  autograd::backward({loss});
  std::vector<double> g = to_doubles(logits.grad());
  for (int64_t j = 0; j < 4; ++j) {
    CHECK(g[size_t(1 * 4 + j)] == 0.0);
    CHECK(g[size_t(3 * 4 + j)] == 0.0);
  }
  // Each counted row's gradient is (softmax - onehot) / 3 and sums to zero.
  double row0 = g[0] + g[1] + g[2] + g[3];
  CHECK(row0 == Approx(0.0).margin(1e-6));
  Tensor p0 = softmax(logits.detach().select(0, 0), -1);
  CHECK(g[1] == Approx((p0.select(0, 1).item() - 1.0) / 3.0).margin(1e-6));

  // A custom ignore_index, and everything ignored gives NaN under mean (0 / 0), like PyTorch.
  Tensor t7 = targets_of({7, 2, 7, 7, 7}, {5});
  CHECK(cross_entropy(logits.detach(), t7, {.ignore_index = 7}).item() ==
        Approx(ref_losses(logits.detach(), {7, 2, 7, 7, 7}, 7, 0.0)[1]).epsilon(1e-5));
  CHECK(std::isnan(cross_entropy(logits.detach(), targets_of({-100, -100, -100, -100, -100}, {5})).item()));
}

TEST_CASE("cross_entropy gradients", "[autograd][cross_entropy][gradcheck]") {
  Tensor t1 = targets_of({1, -100, 3, 0}, {4});
  auto mean_ce = [t1](const std::vector<Tensor>& in) { return cross_entropy(in[0], t1); };
  CHECK(gradcheck(mean_ce, {rnd({4, 5}, 10, true)}));
  Tensor t2 = targets_of({0, 4, 1, 2, -100, 3}, {2, 3});
  auto sum_ce = [t2](const std::vector<Tensor>& in) {
    return cross_entropy(in[0], t2, {.label_smoothing = 0.2, .reduction = "sum"});
  };
  CHECK(gradcheck(sum_ce, {rnd({2, 3, 5}, 11, true)}));
  auto none_ce = [t2](const std::vector<Tensor>& in) { return cross_entropy(in[0], t2, {.reduction = "none"}); };
  Tensor lt = rnd({5, 3, 2}, 12).permute({2, 1, 0});  // (2, 3, 5), non-contiguous
  lt.set_requires_grad(true);
  CHECK(gradcheck(none_ce, {lt}));
}

TEST_CASE("cross_entropy rejects bad targets and options", "[autograd][cross_entropy]") {
  Tensor logits = rnd({3, 4}, 20);
  REQUIRE_THROWS_WITH(cross_entropy(logits, targets_of({0, 4, 1}, {3})),
                      Catch::Contains("[cross_entropy] expected targets in [0, 4)") && Catch::Contains("got target 4"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, targets_of({0, -1, 1}, {3})), Catch::Contains("got target -1"));
  CHECK_NOTHROW(cross_entropy(logits, targets_of({0, -100, 1}, {3})));
  REQUIRE_THROWS_WITH(cross_entropy(logits, targets_of({0, 1}, {2})), Catch::Contains("expected logits (N, V)"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, targets_of({0, 1, 2}, {3}), {.reduction = "avg"}),
                      Catch::Contains("expected reduction"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, ones({3})), Catch::Contains("expected i64 targets"));
}
