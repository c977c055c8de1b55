// Tests for the CPU layer norm against double-precision loops: GPT-2 and odd shapes, with and
// without affine parameters, strided inputs and outputs, 16-bit inputs, optional gradients, a
// finite-difference check of every gradient, and thread-count-independent parameter gradients.
#include "kernels/cpu/layer_norm.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"

namespace {

using namespace tessera;
namespace kc = tessera::kernels::cpu;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor randn_of(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

Shape stats_shape(const Tensor& x) {
  Shape s = x.shape();
  s.pop_back();
  return s;
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

struct Ref {
  std::vector<double> y, mean, rstd, gx, gw, gb;
};

// Double-precision layer norm and its gradients for contiguous (rows, C) values; w, b may be empty.
Ref reference(const std::vector<double>& x, const std::vector<double>& w,
              const std::vector<double>& b, const std::vector<double>& gy, int64_t C, double eps) {
  const int64_t rows = int64_t(x.size()) / C;
  Ref r;
  r.y.resize(x.size());
  r.gx.resize(x.size());
  r.gw.assign(size_t(C), 0.0);
  r.gb.assign(size_t(C), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = x.data() + i * C;
    double mu = 0.0, var = 0.0;
    for (int64_t c = 0; c < C; ++c) mu += xr[c];
    mu /= double(C);
    for (int64_t c = 0; c < C; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= double(C);
    const double rs = 1.0 / std::sqrt(var + eps);
    r.mean.push_back(mu);
    r.rstd.push_back(rs);
    double m1 = 0.0, m2 = 0.0;
    std::vector<double> xhat(static_cast<size_t>(C)), wg(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      xhat[c] = (xr[c] - mu) * rs;
      r.y[i * C + c] = xhat[c] * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
      if (gy.empty()) continue;
      wg[c] = gy[i * C + c] * (w.empty() ? 1.0 : w[c]);
      m1 += wg[c] / double(C);
      m2 += wg[c] * xhat[c] / double(C);
      r.gw[c] += gy[i * C + c] * xhat[c];
      r.gb[c] += gy[i * C + c];
    }
    if (gy.empty()) continue;
    for (int64_t c = 0; c < C; ++c) r.gx[i * C + c] = rs * (wg[c] - m1 - xhat[c] * m2);
  }
  return r;
}

}  // namespace

TEST_CASE("layer_norm forward and backward match double loops", "[layer_norm]") {
  struct Case {
    Shape shape;
    bool weight, bias;
  };
  const std::vector<Case> cases = {{{1, 1}, true, true},     {{3, 5}, true, true},
                                   {{256, 768}, true, true}, {{2, 3, 17}, true, false},
                                   {{4, 33}, false, true},   {{5, 8}, false, false},
                                   {{1, 768}, true, true},   {{37, 129}, true, true}};
  uint64_t seed = 100;
  for (const Case& tc : cases) {
    INFO("shape " << shape_str(tc.shape) << " weight " << tc.weight << " bias " << tc.bias);
    const int64_t C = tc.shape.back();
    Tensor x = randn_of(tc.shape, seed++);
    Tensor w = tc.weight ? randn_of({C}, seed++) : Tensor();
    Tensor b = tc.bias ? randn_of({C}, seed++) : Tensor();
    Tensor gy = randn_of(tc.shape, seed++);
    Tensor y = empty(tc.shape), mean = empty(stats_shape(x)), rstd = empty(stats_shape(x));
    kc::layer_norm(x, w, b, 1e-5, y, mean, rstd);
    const Ref ref = reference(values(x), tc.weight ? values(w) : std::vector<double>{},
                              tc.bias ? values(b) : std::vector<double>{}, values(gy), C, 1e-5);
    expect_close(values(y), ref.y, 1e-5, 1e-4);
    expect_close(values(mean), ref.mean, 1e-6, 1e-5);
    expect_close(values(rstd), ref.rstd, 1e-6, 1e-4);
    Tensor gx = empty(tc.shape), gw = empty({C}), gb = empty({C});
    kc::layer_norm_backward(gy, x, w, mean, rstd, gx, gw, gb);
    expect_close(values(gx), ref.gx, 1e-5, 1e-3);
    expect_close(values(gw), ref.gw, 1e-4, 1e-4);
    expect_close(values(gb), ref.gb, 1e-4, 1e-4);
  }
}

TEST_CASE("layer_norm handles strided inputs and outputs", "[layer_norm]") {
  // x (6, 10) is the transpose of a (10, 6) tensor; y and grad_x are transposed buffers too.
  Tensor x = randn_of({10, 6}, 1).transpose(0, 1);
  Tensor w = randn_of({20}, 2).slice(0, 0, 20, 2);  // weight with stride 2
  Tensor b = randn_of({10}, 3);
  Tensor gy = randn_of({10, 6}, 4).transpose(0, 1);
  Tensor y = empty({10, 6}).transpose(0, 1), mean = empty({6}), rstd = empty({6});
  kc::layer_norm(x, w, b, 1e-5, y, mean, rstd);
  const Ref ref = reference(values(x), values(w), values(b), values(gy), 10, 1e-5);
  expect_close(values(y), ref.y, 1e-5, 1e-4);
  Tensor gx = empty({10, 6}).transpose(0, 1), gw = empty({10}), gb = empty({20}).slice(0, 0, 20, 2);
  kc::layer_norm_backward(gy, x, w, mean, rstd, gx, gw, gb);
  expect_close(values(gx), ref.gx, 1e-5, 1e-3);
  expect_close(values(gw), ref.gw, 1e-5, 1e-4);
  expect_close(values(gb), ref.gb, 1e-5, 1e-4);
}

TEST_CASE("layer_norm on f16 and bf16 inputs with f32 or 16-bit parameters", "[layer_norm]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    for (DType pt : {DType::f32, dt}) {
      INFO(dtype_name(dt) << " input, " << dtype_name(pt) << " parameters");
      Tensor x = randn_of({9, 96}, 10, dt), gy = randn_of({9, 96}, 11, dt);
      Tensor w = randn_of({96}, 12, pt), b = randn_of({96}, 13, pt);
      Tensor y = empty({9, 96}, {.dtype = dt}), mean = empty({9}), rstd = empty({9});
      kc::layer_norm(x, w, b, 1e-5, y, mean, rstd);
      const Ref ref = reference(values(x), values(w), values(b), values(gy), 96, 1e-5);
      const double tol = dt == DType::bf16 ? 2e-2 : 3e-3;
      expect_close(values(y), ref.y, tol, tol);
      Tensor gx = empty({9, 96}, {.dtype = dt}), gw = empty({96}, {.dtype = pt}),
             gb = empty({96}, {.dtype = pt});
      kc::layer_norm_backward(gy, x, w, mean, rstd, gx, gw, gb);
      expect_close(values(gx), ref.gx, tol, tol);
      expect_close(values(gw), ref.gw, 4 * tol, tol);
      expect_close(values(gb), ref.gb, 4 * tol, tol);
    }
  }
}

TEST_CASE("layer_norm_backward computes only the gradients asked for", "[layer_norm]") {
  Tensor x = randn_of({7, 12}, 20), w = randn_of({12}, 21), gy = randn_of({7, 12}, 22);
  Tensor y = empty({7, 12}), mean = empty({7}), rstd = empty({7});
  kc::layer_norm(x, w, Tensor(), 1e-5, y, mean, rstd);
  const Ref ref = reference(values(x), values(w), {}, values(gy), 12, 1e-5);
  Tensor gx = empty({7, 12});
  kc::layer_norm_backward(gy, x, w, mean, rstd, gx, Tensor(), Tensor());
  expect_close(values(gx), ref.gx, 1e-5, 1e-3);
  Tensor gw = full({12}, 99.0), gb = full({12}, 99.0);  // overwritten, not accumulated
  kc::layer_norm_backward(gy, x, w, mean, rstd, Tensor(), gw, gb);
  expect_close(values(gw), ref.gw, 1e-5, 1e-4);
  expect_close(values(gb), ref.gb, 1e-5, 1e-4);
  CHECK_THROWS_AS(kc::layer_norm_backward(gy, x, w, mean, rstd, Tensor(), empty({11}), Tensor()),
                  ValueError);
  CHECK_THROWS_AS(kc::layer_norm(x, randn_of({5}, 1), Tensor(), 1e-5, y, mean, rstd), ValueError);
}

TEST_CASE("layer_norm gradients agree with finite differences of the forward", "[layer_norm]") {
  const int64_t rows = 3, C = 6;
  Tensor x = randn_of({rows, C}, 30), w = randn_of({C}, 31), b = randn_of({C}, 32);
  Tensor gy = randn_of({rows, C}, 33);  // loss = sum(gy * y)
  const std::vector<double> vg = values(gy);
  auto loss = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
    Tensor y = empty({rows, C}), mean = empty({rows}), rstd = empty({rows});
    kc::layer_norm(xi, wi, bi, 1e-5, y, mean, rstd);
    std::vector<double> vy = values(y);
    double s = 0.0;
    for (size_t i = 0; i < vy.size(); ++i) s += vg[i] * vy[i];
    return s;
  };
  Tensor y = empty({rows, C}), mean = empty({rows}), rstd = empty({rows});
  kc::layer_norm(x, w, b, 1e-5, y, mean, rstd);
  Tensor gx = empty({rows, C}), gw = empty({C}), gb = empty({C});
  kc::layer_norm_backward(gy, x, w, mean, rstd, gx, gw, gb);
  const double h = 1e-2;
  auto numeric = [&](const Tensor& t, int64_t i, int which) {
    Tensor p = t.clone(), m = t.clone();
    p.data<float>()[i] += float(h);
    m.data<float>()[i] -= float(h);
    double lp = which == 0 ? loss(p, w, b) : which == 1 ? loss(x, p, b) : loss(x, w, p);
    double lm = which == 0 ? loss(m, w, b) : which == 1 ? loss(x, m, b) : loss(x, w, m);
    return (lp - lm) / (2 * h);
  };
  const std::vector<double> agx = values(gx), agw = values(gw), agb = values(gb);
  for (int64_t i = 0; i < rows * C; ++i)
    CHECK(agx[i] == Approx(numeric(x, i, 0)).margin(2e-3).epsilon(1e-2));
  for (int64_t c = 0; c < C; ++c) {
    CHECK(agw[c] == Approx(numeric(w, c, 1)).margin(1e-3).epsilon(1e-3));
    CHECK(agb[c] == Approx(numeric(b, c, 2)).margin(1e-3).epsilon(1e-3));
  }
}

TEST_CASE("layer_norm parameter gradients do not depend on the thread count", "[layer_norm]") {
  Tensor x = randn_of({300, 64}, 40), w = randn_of({64}, 41), gy = randn_of({300, 64}, 42);
  Tensor y = empty({300, 64}), mean = empty({300}), rstd = empty({300});
  kc::layer_norm(x, w, Tensor(), 1e-5, y, mean, rstd);
  const int saved = num_threads();
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    Tensor gw = empty({64}), gb = empty({64});
    kc::layer_norm_backward(gy, x, w, mean, rstd, Tensor(), gw, gb);
    std::vector<double> r = values(gw);
    std::vector<double> rb = values(gb);
    r.insert(r.end(), rb.begin(), rb.end());
    results.push_back(r);
  }
  set_num_threads(saved);
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}
