// Tests for the CPU fused cross-entropy against double-precision loops: GPT-2 vocabulary width,
// ignore_index rows (the default -100 and a real class id), label smoothing 0 and 0.1, strided and
// 16-bit logits, broadcast incoming gradients, finite differences, and target range errors.
#include "kernels/cpu/cross_entropy.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "core/factory.h"

namespace {

using namespace tessera;
namespace kc = tessera::kernels::cpu;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor randn_of(const Shape& shape, uint64_t seed, double scale = 1.0, DType dtype = DType::f32) {
  Generator gen(seed);
  Tensor t = randn(shape, {}, &gen);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(p[i] * scale);
  return t.to(dtype);
}

Tensor targets_of(const std::vector<int64_t>& v) {
  return from_vector(v, {int64_t(v.size())}, {.dtype = DType::i64});
}

struct Ref {
  std::vector<double> loss, lse, grad;
};

// Double-precision losses, lse and d(sum_i g_i loss_i)/d logits for contiguous (N, V) values.
Ref reference(const std::vector<double>& x, const std::vector<int64_t>& t,
              const std::vector<double>& g, int64_t V, int64_t ignore, double s) {
  const int64_t N = int64_t(t.size());
  Ref r;
  r.grad.assign(x.size(), 0.0);
  for (int64_t i = 0; i < N; ++i) {
    const double* xr = x.data() + i * V;
    double m = -std::numeric_limits<double>::infinity(), sum = 0.0, mean = 0.0;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, xr[v]);
    for (int64_t v = 0; v < V; ++v) sum += std::exp(xr[v] - m);
    for (int64_t v = 0; v < V; ++v) mean += xr[v] / double(V);
    const double lse = m + std::log(sum);
    r.lse.push_back(lse);
    if (t[i] == ignore) {
      r.loss.push_back(0.0);
      continue;
    }
    r.loss.push_back((1 - s) * (lse - xr[t[i]]) + s * (lse - mean));
    for (int64_t v = 0; v < V; ++v) {
      r.grad[i * V + v] =
          g[i] * (std::exp(xr[v] - lse) - (v == t[i] ? 1 - s : 0.0) - s / double(V));
    }
  }
  return r;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                  double rtol) {
  REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i])) && bad++ < 5) {
      INFO("at " << i << ": got " << got[i] << ", want " << want[i]);
      CHECK(false);
    }
  }
  CHECK(bad == 0);
}

// Runs forward and backward and checks both against the reference.
void check_case(const Tensor& logits, const std::vector<int64_t>& tgt, const Tensor& grad_losses,
                int64_t ignore, double s, const Tensor& grad_logits, double tol) {
  const int64_t N = logits.size(0), V = logits.size(1);
  Tensor t = targets_of(tgt);
  Tensor losses = empty({N}), lse = empty({N});
  kc::cross_entropy(logits, t, ignore, s, losses, lse);
  const Ref ref = reference(values(logits), tgt, values(grad_losses), V, ignore, s);
  expect_close(values(losses), ref.loss, tol, tol);
  expect_close(values(lse), ref.lse, tol * 1e-1, tol * 1e-1);  // long rows: the sum must not drift
  kc::cross_entropy_backward(logits, t, lse, grad_losses, ignore, s, grad_logits);
  // The target entry cancels (p_t - (1 - s)): its f32 error is absolute, about ulp(|grad_loss|).
  expect_close(values(grad_logits), ref.grad, tol * 1e-1, tol);
}

}  // namespace

TEST_CASE("cross_entropy matches double loops with ignore_index and label smoothing",
          "[cross_entropy]") {
  struct Case {
    int64_t N, V;
  };
  uint64_t seed = 1;
  for (Case c : {Case{1, 1}, Case{1, 2}, Case{3, 5}, Case{7, 33}, Case{4, 50257}}) {
    for (double s : {0.0, 0.1}) {
      for (int64_t ignore : {int64_t(-100), int64_t(1)}) {
        INFO("N " << c.N << " V " << c.V << " smoothing " << s << " ignore " << ignore);
        std::vector<int64_t> tgt;
        for (int64_t i = 0; i < c.N; ++i) tgt.push_back((i * 7919 + 3) % c.V);
        if (c.N > 2) tgt[1] = ignore;  // at least one ignored row
        Tensor logits = randn_of({c.N, c.V}, seed++, 4.0);
        Tensor gl = randn_of({c.N}, seed++);
        check_case(logits, tgt, gl, ignore, s, empty({c.N, c.V}), 1e-5);
      }
    }
  }
}

TEST_CASE("cross_entropy with strided logits, broadcast grads and strided grad_logits",
          "[cross_entropy]") {
  // logits (6, 40) as the transpose of (40, 6); every other column of a (5, 81) tensor.
  Tensor lt = randn_of({40, 6}, 20, 3.0).transpose(0, 1);
  Tensor ones_grad = full({1}, 0.5).expand({6});  // d mean-style broadcast, stride 0
  check_case(lt, {0, 39, -100, 7, 7, 20}, ones_grad, -100, 0.1, empty({40, 6}).transpose(0, 1),
             1e-5);
  Tensor ls = randn_of({5, 81}, 21, 3.0).slice(1, 0, 81, 2);  // (5, 41)
  check_case(ls, {40, 0, 1, 2, 3}, randn_of({5}, 22), -100, 0.0, empty({5, 41}), 1e-5);
}

TEST_CASE("cross_entropy on f16 and bf16 logits", "[cross_entropy]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    Tensor logits = randn_of({5, 1000}, 30, 3.0, dt);
    check_case(logits, {999, 0, -100, 500, 3}, randn_of({5}, 31), -100, 0.1,
               empty({5, 1000}, {.dtype = dt}), dt == DType::bf16 ? 2e-2 : 4e-3);
  }
}

TEST_CASE("cross_entropy is stable for large logits", "[cross_entropy]") {
  Tensor logits =
      from_vector(std::vector<float>{1000.f, 990.f, 980.f, -1000.f, -1010.f, -1020.f}, {2, 3});
  Tensor losses = empty({2}), lse = empty({2});
  kc::cross_entropy(logits, targets_of({1, 0}), -100, 0.0, losses, lse);
  const double l0 = 10.0 + std::log(1 + std::exp(-10.0) + std::exp(-20.0));
  const double l1 = std::log(1 + std::exp(-10.0) + std::exp(-20.0));
  CHECK(values(losses)[0] == Approx(l0).epsilon(1e-6));
  CHECK(values(losses)[1] == Approx(l1).margin(1e-6));
}

TEST_CASE("cross_entropy gradient agrees with finite differences of the forward",
          "[cross_entropy]") {
  const int64_t N = 3, V = 6;
  const std::vector<int64_t> tgt = {2, -100, 5};
  Tensor logits = randn_of({N, V}, 40, 2.0), gl = randn_of({N}, 41);
  const std::vector<double> vg = values(gl);
  for (double s : {0.0, 0.1}) {
    INFO("smoothing " << s);
    auto total = [&](const Tensor& x) {
      Tensor losses = empty({N}), lse = empty({N});
      kc::cross_entropy(x, targets_of(tgt), -100, s, losses, lse);
      std::vector<double> l = values(losses);
      double acc = 0.0;
      for (int64_t i = 0; i < N; ++i) acc += vg[i] * l[i];
      return acc;
    };
    Tensor losses = empty({N}), lse = empty({N}), grad = empty({N, V});
    kc::cross_entropy(logits, targets_of(tgt), -100, s, losses, lse);
    kc::cross_entropy_backward(logits, targets_of(tgt), lse, gl, -100, s, grad);
    const std::vector<double> analytic = values(grad);
    const double h = 1e-2;
    for (int64_t i = 0; i < N * V; ++i) {
      Tensor xp = logits.clone(), xm = logits.clone();
      xp.data<float>()[i] += float(h);
      xm.data<float>()[i] -= float(h);
      CHECK(analytic[i] == Approx((total(xp) - total(xm)) / (2 * h)).margin(1e-3).epsilon(1e-3));
    }
  }
}

TEST_CASE("cross_entropy rejects targets out of range and bad shapes", "[cross_entropy]") {
  Tensor logits = randn_of({2, 4}, 50);
  Tensor losses = empty({2}), lse = empty({2});
  CHECK_THROWS_WITH(kc::cross_entropy(logits, targets_of({0, 4}), -100, 0.0, losses, lse),
                    Catch::Contains("got 4") && Catch::Contains("[0, 4)"));
  CHECK_THROWS_AS(kc::cross_entropy(logits, targets_of({-1, 0}), -100, 0.0, losses, lse),
                  ValueError);
  CHECK_THROWS_AS(kc::cross_entropy(logits, targets_of({0}), -100, 0.0, losses, lse), ValueError);
  CHECK_THROWS_AS(kc::cross_entropy(logits, targets_of({0, 1}), -100, 0.0, empty({3}), lse),
                  ValueError);
  CHECK_THROWS_AS(kc::cross_entropy_backward(logits, targets_of({0, 9}), lse, empty({2}), -100, 0.0,
                                             empty({2, 4})),
                  ValueError);
}
