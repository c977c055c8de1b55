// Tests for the CPU softmax family against double-precision loops: odd row widths up to 50257,
// 3-D inputs, transposed / sliced inputs and outputs, 16-bit floats, extreme and masked values, and
// both backwards against their formulas and against finite differences of the forward kernels.
#include "kernels/cpu/softmax.h"

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
  Tensor s = empty(shape);
  const float* src = t.data<float>();
  float* dst = s.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = float(src[i] * scale);
  return s.to(dtype);
}

// Row-wise softmax (log_softmax when `log`) of a contiguous (rows, cols) value list, in double.
std::vector<double> ref_softmax(const std::vector<double>& x, int64_t cols, bool log) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r * cols < x.size(); ++r) {
    const double* xr = x.data() + r * cols;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < cols; ++i) m = std::max(m, xr[i]);
    double s = 0.0;
    for (int64_t i = 0; i < cols; ++i) s += std::exp(xr[i] - m);
    for (int64_t i = 0; i < cols; ++i) {
      out[r * cols + i] = log ? xr[i] - m - std::log(s) : std::exp(xr[i] - m) / s;
    }
  }
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                  double rtol) {
  REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]))) {
      if (bad++ < 5) INFO("at " << i << ": got " << got[i] << ", want " << want[i]);
      CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
    }
  }
  CHECK(bad == 0);
}

void check_forward(const Tensor& x, const Tensor& out, bool log, double atol, double rtol) {
  if (log) {
    kc::log_softmax(x, out);
  } else {
    kc::softmax(x, out);
  }
  expect_close(values(out), ref_softmax(values(x), x.shape().back(), log), atol, rtol);
}

}  // namespace

TEST_CASE("softmax and log_softmax match double loops on odd sizes", "[softmax]") {
  const std::vector<Shape> shapes = {{1, 1},   {1, 7},     {3, 1},    {3, 5},
                                     {17, 33}, {3, 50257}, {2, 3, 9}, {5}};
  uint64_t seed = 1;
  for (const Shape& shape : shapes) {
    for (bool log : {false, true}) {
      INFO("shape " << shape_str(shape) << (log ? " log_softmax" : " softmax"));
      Tensor x = randn_of(shape, seed++, 3.0);
      check_forward(x, empty(shape), log, 1e-6, 1e-5);
    }
  }
}

TEST_CASE("softmax rows sum to one and survive large and masked values", "[softmax]") {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = from_vector(
      std::vector<float>{1000.f, 1001.f, 999.f, -inf, -1000.f, -1001.f, -inf, -999.f}, {2, 4});
  Tensor y = empty({2, 4});
  kc::softmax(x, y);
  std::vector<double> v = values(y);
  for (double e : v) CHECK(std::isfinite(e));
  CHECK(v[3] == 0.0);
  CHECK(v[6] == 0.0);
  CHECK(v[0] + v[1] + v[2] + v[3] == Approx(1.0).epsilon(1e-6));
  CHECK(v[1] == Approx(std::exp(1.0) / (1.0 + std::exp(1.0) + std::exp(-1.0))).epsilon(1e-6));
  Tensor ly = empty({2, 4});
  kc::log_softmax(x, ly);
  std::vector<double> lv = values(ly);
  CHECK(lv[3] == -std::numeric_limits<double>::infinity());
  CHECK(lv[7] == Approx(-std::log(1.0 + std::exp(-2.0) + std::exp(-1.0))).epsilon(1e-6));
}

TEST_CASE("softmax handles transposed and sliced inputs and outputs", "[softmax]") {
  for (bool log : {false, true}) {
    INFO((log ? "log_softmax" : "softmax"));
    // x (6, 11) as the transpose of an (11, 6) tensor: the last dim has stride 6.
    Tensor xt = randn_of({11, 6}, 7, 2.0).transpose(0, 1);
    REQUIRE_FALSE(xt.is_contiguous());
    check_forward(xt, empty({6, 11}), log, 1e-6, 1e-5);
    // Every other column of a (5, 21) tensor, and a sliced row range.
    Tensor xs = randn_of({5, 21}, 8, 2.0).slice(1, 1, 20, 2).slice(0, 1, 4);
    check_forward(xs, empty(xs.shape()), log, 1e-6, 1e-5);
    // Non-contiguous output: the transpose of an (11, 6) buffer.
    Tensor x = randn_of({6, 11}, 9, 2.0);
    Tensor out = empty({11, 6}).transpose(0, 1);
    check_forward(x, out, log, 1e-6, 1e-5);
    // Broadcast input (stride 0 rows).
    Tensor xb = randn_of({1, 13}, 10).expand({4, 13});
    check_forward(xb, empty({4, 13}), log, 1e-6, 1e-5);
  }
}

TEST_CASE("softmax on f16 and bf16 computes in f32", "[softmax]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    for (bool log : {false, true}) {
      INFO(dtype_name(dt) << (log ? " log_softmax" : " softmax"));
      Tensor x = randn_of({7, 300}, 11, 2.0, dt);
      Tensor out = empty({7, 300}, {.dtype = dt});
      const double rtol = dt == DType::bf16 ? 8e-3 : 1e-3;
      check_forward(x, out, log, 1e-4, rtol);
      CHECK(out.dtype() == dt);
    }
  }
}

TEST_CASE("softmax and log_softmax backwards match their formulas", "[softmax]") {
  for (int64_t cols : {1, 5, 50257}) {
    INFO("cols " << cols);
    const int64_t rows = cols > 1000 ? 2 : 4;
    Tensor x = randn_of({rows, cols}, 20 + cols, 2.0);
    Tensor gy = randn_of({rows, cols}, 30 + cols);
    for (bool log : {false, true}) {
      Tensor y = empty({rows, cols}), gx = empty({rows, cols});
      if (log) {
        kc::log_softmax(x, y);
        kc::log_softmax_backward(y, gy, gx);
      } else {
        kc::softmax(x, y);
        kc::softmax_backward(y, gy, gx);
      }
      std::vector<double> vy = values(y), vg = values(gy), want(vy.size());
      for (int64_t r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (int64_t i = 0; i < cols; ++i)
          acc += log ? vg[r * cols + i] : vg[r * cols + i] * vy[r * cols + i];
        for (int64_t i = 0; i < cols; ++i) {
          const int64_t k = r * cols + i;
          want[k] = log ? vg[k] - std::exp(vy[k]) * acc : vy[k] * (vg[k] - acc);
        }
      }
      expect_close(values(gx), want, 1e-6, 1e-4);
    }
  }
}

TEST_CASE("softmax backwards agree with finite differences of the forward", "[softmax]") {
  const int64_t rows = 3, cols = 7;
  Tensor x = randn_of({rows, cols}, 41);
  Tensor w = randn_of({rows, cols}, 42);  // loss = sum(w * f(x)), so grad_y = w
  const std::vector<double> vw = values(w);
  for (bool log : {false, true}) {
    INFO((log ? "log_softmax" : "softmax"));
    auto loss = [&](const Tensor& xin) {
      Tensor y = empty({rows, cols});
      if (log) {
        kc::log_softmax(xin, y);
      } else {
        kc::softmax(xin, y);
      }
      std::vector<double> vy = values(y);
      double s = 0.0;
      for (size_t i = 0; i < vy.size(); ++i) s += vw[i] * vy[i];
      return s;
    };
    Tensor y = empty({rows, cols}), gx = empty({rows, cols});
    if (log) {
      kc::log_softmax(x, y);
      kc::log_softmax_backward(y, w, gx);
    } else {
      kc::softmax(x, y);
      kc::softmax_backward(y, w, gx);
    }
    const std::vector<double> analytic = values(gx);
    const double h = 1e-2;
    for (int64_t i = 0; i < rows * cols; ++i) {
      Tensor xp = x.clone(), xm = x.clone();
      xp.data<float>()[i] += float(h);
      xm.data<float>()[i] -= float(h);
      const double numeric = (loss(xp) - loss(xm)) / (2 * h);
      CHECK(analytic[i] == Approx(numeric).margin(1e-3).epsilon(1e-3));
    }
  }
}

TEST_CASE("softmax backward handles 16-bit and strided operands", "[softmax]") {
  Tensor x = randn_of({9, 4}, 50).transpose(0, 1);  // (4, 9), strided
  Tensor gy = randn_of({4, 9}, 51);
  Tensor y = empty({4, 9}), gx = empty({9, 4}).transpose(0, 1);
  kc::softmax(x, y);
  kc::softmax_backward(y, gy, gx);
  Tensor yh = y.to(DType::bf16), gyh = gy.to(DType::bf16),
         gxh = empty({4, 9}, {.dtype = DType::bf16});
  kc::softmax_backward(yh, gyh, gxh);
  expect_close(values(gxh), values(gx), 2e-2, 2e-2);
  CHECK_THROWS_AS(kc::softmax_backward(y, gyh, gx), ValueError);
}
