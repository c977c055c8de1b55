// Tests for run-time ISA dispatch: the ISA choice (TESSERA_ISA, the test override), and the
// element-wise, Adam, softmax, layer-norm and row-exp kernels run pinned to AVX2 and to AVX-512 in
// one process, checking that the AVX-512 bodies really ran and that both give the same numbers:
// bit for bit where the operations per element are the same, within a few ulp where AVX-512's
// wider lanes change the order of a row sum.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "kernels/adam_math.h"
#include "kernels/cpu/adam.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/row_math.h"
#include "kernels/cpu/softmax.h"

namespace {

using namespace tessera;
namespace kc = tessera::kernels::cpu;
using kc::Isa;
using tessera::kernels::AdamStep;
using tessera::kernels::BinaryOp;
using tessera::kernels::UnaryOp;

// Restores the default ISA choice when a test ends, also when it fails.
struct IsaGuard {
  ~IsaGuard() { kc::set_isa_override_for_testing(std::nullopt); }
};

std::vector<float> floats(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

Tensor randn_of(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  Tensor t = randn(shape, {}, &gen);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(p[i] * scale);
  return t;
}

// Results of `run` under AVX2 and, when the CPU has it, AVX-512 (empty otherwise). Checks that no
// AVX-512 body ran under AVX2, and that one ran under AVX-512 when `fast_path` (a single element
// takes the strided loop, which has no AVX-512 copy).
struct BothIsas {
  std::vector<std::vector<float>> avx2, avx512;
};
BothIsas run_both(const std::function<std::vector<std::vector<float>>()>& run,
                  bool fast_path = true) {
  IsaGuard guard;
  BothIsas r;
  kc::set_isa_override_for_testing(Isa::avx2);
  uint64_t before = kc::avx512_runs_on_this_thread();
  r.avx2 = run();
  CHECK(kc::avx512_runs_on_this_thread() == before);
  if (kc::cpu_supports_avx512()) {
    kc::set_isa_override_for_testing(Isa::avx512);
    before = kc::avx512_runs_on_this_thread();
    r.avx512 = run();
    CHECK((kc::avx512_runs_on_this_thread() > before) == fast_path);
  }
  return r;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Bit equality (NaN payloads included) of every output.
void expect_identical(const BothIsas& r, const char* what) {
  if (r.avx512.empty()) return;  // no AVX-512 here: nothing to compare
  REQUIRE(r.avx2.size() == r.avx512.size());
  for (size_t k = 0; k < r.avx2.size(); ++k) {
    REQUIRE(r.avx2[k].size() == r.avx512[k].size());
    for (size_t i = 0; i < r.avx2[k].size(); ++i) {
      if (!same_bits(r.avx2[k][i], r.avx512[k][i])) {
        INFO(what << " output " << k << " element " << i << ": avx2 " << r.avx2[k][i] << ", avx512 "
                  << r.avx512[k][i]);
        REQUIRE(false);
      }
    }
  }
}

// |avx2 - avx512| <= rtol |avx2| + atol, NaN and infinities equal.
void expect_near(const BothIsas& r, double rtol, double atol, const char* what) {
  if (r.avx512.empty()) return;
  REQUIRE(r.avx2.size() == r.avx512.size());
  for (size_t k = 0; k < r.avx2.size(); ++k) {
    REQUIRE(r.avx2[k].size() == r.avx512[k].size());
    for (size_t i = 0; i < r.avx2[k].size(); ++i) {
      const double a = r.avx2[k][i], b = r.avx512[k][i];
      const bool ok = std::isnan(a) ? std::isnan(b)
                                    : (a == b || std::fabs(a - b) <= rtol * std::fabs(a) + atol);
      if (!ok) {
        INFO(what << " output " << k << " element " << i << ": avx2 " << a << ", avx512 " << b);
        REQUIRE(ok);
      }
    }
  }
}

// Widths that leave every kind of remainder after 8- and 16-lane vectors.
const std::vector<int64_t> kWidths = {1, 7, 16, 23, 517, 4099};

}  // namespace

TEST_CASE("active_isa follows the CPU, TESSERA_ISA and the test override", "[isa]") {
  IsaGuard guard;
  const Isa best = kc::cpu_supports_avx512() ? Isa::avx512 : Isa::avx2;
  const char* saved = std::getenv("TESSERA_ISA");
  const std::string saved_value = saved ? saved : "";

  unsetenv("TESSERA_ISA");
  kc::set_isa_override_for_testing(std::nullopt);
  CHECK(kc::active_isa() == best);
  CHECK(kc::cpu_has_avx512() == (best == Isa::avx512));
  setenv("TESSERA_ISA", "avx2", 1);
  kc::set_isa_override_for_testing(std::nullopt);
  CHECK(kc::active_isa() == Isa::avx2);
  CHECK_FALSE(kc::cpu_has_avx512());
  if (saved) {
    setenv("TESSERA_ISA", saved_value.c_str(), 1);
  } else {
    unsetenv("TESSERA_ISA");
  }

  kc::set_isa_override_for_testing(Isa::avx2);
  CHECK(kc::active_isa() == Isa::avx2);
  CHECK(kc::with_isa([](auto isa) { return decltype(isa)::kIsa; }) == Isa::avx2);
  CHECK(kc::with_isa([](auto isa) { return decltype(isa)::kFloatLanes; }) == 8);
  if (kc::cpu_supports_avx512()) {
    kc::set_isa_override_for_testing(Isa::avx512);
    CHECK(kc::active_isa() == Isa::avx512);
    CHECK(std::string(kc::isa_name(kc::active_isa())) == "avx512");
    CHECK(kc::with_isa([](auto isa) { return decltype(isa)::kFloatLanes; }) == 16);
  } else {
    CHECK_THROWS_AS(kc::set_isa_override_for_testing(Isa::avx512), ValueError);
    CHECK(kc::active_isa() == Isa::avx2);
  }
}

TEST_CASE("unary kernels give identical f32 results under AVX2 and AVX-512", "[isa]") {
  const std::vector<UnaryOp> ops = {
      UnaryOp::neg,      UnaryOp::abs,  UnaryOp::exp,        UnaryOp::log,    UnaryOp::sqrt,
      UnaryOp::rsqrt,    UnaryOp::tanh, UnaryOp::sigmoid,    UnaryOp::relu,   UnaryOp::gelu_tanh,
      UnaryOp::gelu_erf, UnaryOp::silu, UnaryOp::reciprocal, UnaryOp::square, UnaryOp::sign};
  for (int64_t n : kWidths) {
    Tensor x = randn_of({n}, 11 + uint64_t(n), 4.0);
    float* px = x.data<float>();
    // Edge values in the first lanes: the vector bodies see them, not just the scalar tails.
    const float edges[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           -0.0f,
                           95.0f,
                           -110.0f};
    for (int64_t i = 0; i < n && i < 6; ++i) px[i] = edges[i];
    for (UnaryOp op : ops) {
      BothIsas r = run_both(
          [&] {
            Tensor out = empty({n});
            kc::unary(op, x, out);
            return std::vector<std::vector<float>>{floats(out)};
          },
          n > 1);
      INFO("n = " << n);
      expect_identical(r, kc::unary_op_name(op));
    }
  }
}

TEST_CASE("binary kernels give identical f32 results under AVX2 and AVX-512", "[isa]") {
  const std::vector<BinaryOp> ops = {BinaryOp::add,
                                     BinaryOp::sub,
                                     BinaryOp::mul,
                                     BinaryOp::div,
                                     BinaryOp::maximum,
                                     BinaryOp::minimum,
                                     BinaryOp::lt,
                                     BinaryOp::relu_backward,
                                     BinaryOp::pow,
                                     BinaryOp::gelu_tanh_backward,
                                     BinaryOp::silu_backward,
                                     BinaryOp::gelu_erf_backward,
                                     BinaryOp::sigmoid_backward,
                                     BinaryOp::tanh_backward};
  for (int64_t n : kWidths) {
    Tensor a = randn_of({3, n}, 5 + uint64_t(n), 3.0);
    Tensor b = randn_of({3, n}, 7 + uint64_t(n), 3.0);
    Tensor b_row = randn_of({1, n}, 9 + uint64_t(n)).expand({3, n});   // stride-0 rows
    Tensor a_col = randn_of({3, 1}, 13 + uint64_t(n)).expand({3, n});  // stride-0 elements
    for (BinaryOp op : ops) {
      const DType out_dtype = op == BinaryOp::lt ? DType::b8 : DType::f32;
      BothIsas r = run_both([&] {
        std::vector<std::vector<float>> outs;
        for (auto [x, y] : {std::pair{a, b}, std::pair{a, b_row}, std::pair{a_col, b}}) {
          Tensor out = empty({3, n}, {.dtype = out_dtype});
          kc::binary(op, x, y, out);
          outs.push_back(floats(out));
        }
        return outs;
      });
      INFO("n = " << n);
      expect_identical(r, kc::binary_op_name(op));
    }
  }
}

TEST_CASE("adam_update is bit-identical under AVX2 and AVX-512 and matches adam_element", "[isa]") {
  for (bool decoupled : {true, false}) {
    for (int64_t n : {int64_t(1), int64_t(15), int64_t(37), int64_t(70001)}) {
      const Tensor p0 = randn_of({n}, 21), g = randn_of({n}, 22);
      AdamStep h{.lr = 1e-2f, .weight_decay = 0.1f, .decoupled = decoupled, .step = 1};
      BothIsas r = run_both([&] {
        Tensor p = p0.clone(), m = zeros({n}), v = zeros({n});
        for (int64_t step = 1; step <= 3; ++step) {
          h.step = step;
          kc::adam_update(p, g, m, v, h);
        }
        return std::vector<std::vector<float>>{floats(p), floats(m), floats(v)};
      });
      INFO("n = " << n << ", decoupled = " << decoupled);
      expect_identical(r, "adam_update");
      // Both equal the scalar update of adam_math.h, element by element.
      std::vector<float> p = floats(p0), gv = floats(g), m(size_t(n), 0.0f), v(size_t(n), 0.0f);
      for (int64_t step = 1; step <= 3; ++step) {
        const auto c = tessera::kernels::adam_coeffs(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay,
                                                     decoupled, step);
        for (size_t i = 0; i < p.size(); ++i) {
          tessera::kernels::adam_element(p[i], gv[i], m[i], v[i], c);
        }
      }
      expect_identical({.avx2 = {p, m, v}, .avx512 = r.avx2}, "adam_update vs adam_element");
    }
  }
}

TEST_CASE("row exp helpers store identical exponentials under AVX2 and AVX-512", "[isa]") {
  for (int64_t n : kWidths) {
    std::vector<float> x = floats(randn_of({n}, 31 + uint64_t(n), 10.0));
    x[0] = -std::numeric_limits<float>::infinity();  // a masked score
    float sum2 = 0.0f, sum512 = 0.0f;
    BothIsas r = run_both([&] {
      std::vector<float> e(static_cast<size_t>(n)), scaled(e.size()), sub(e.size());
      const float s = kc::detail::row_exp_store(x.data(), 1.5f, e.data(), n);
      (kc::active_isa() == Isa::avx512 ? sum512 : sum2) = s;
      kc::detail::row_exp_scale_add(x.data(), 1.5f, 0.25f, -3.0f, scaled.data(), n);
      kc::detail::row_sub_exp_scale(x.data(), e.data(), 0.5f, sub.data(), n);
      std::vector<float> diff = x;
      kc::detail::row_exp_sub(diff.data(), scaled.data(), n);
      return std::vector<std::vector<float>>{e, scaled, sub, diff};
    });
    INFO("n = " << n);
    expect_identical(r, "row exp");
    // The vector lanes compute exp_approx's operations exactly.
    for (size_t i = 0; i < size_t(n); ++i) {
      REQUIRE(same_bits(r.avx2[0][i], kc::detail::exp_approx(x[i] - 1.5f)));
      REQUIRE(same_bits(r.avx2[3][i], kc::detail::exp_approx(x[i] - r.avx2[1][i])));
    }
    // The sum's order follows the lane count: 16 lanes may round the last bits differently.
    if (!r.avx512.empty()) CHECK(std::fabs(sum512 - sum2) <= 1e-6f * sum2);
  }
}

TEST_CASE("exp_approx is within 3e-7 of exp over f32's range and saturates at its ends", "[isa]") {
  using kc::detail::exp_approx;
  // Relative error against double exp wherever the result is a normal float.
  double worst = 0.0;
  for (double x = -87.3; x <= 88.37; x += 0.001) {
    const double want = std::exp(double(float(x)));
    worst = std::max(worst, std::fabs(exp_approx(float(x)) - want) / want);
  }
  CHECK(worst < 3e-7);
  // Results come from a scale 2^n built in the exponent bits: n = -127 gives 0, n = 128 +inf
  // (from 127.5 ln 2 = 88.38 up, a little before f32's own overflow at 88.72).
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-88.0f, -90.0f, -1e4f, -std::numeric_limits<float>::max(), -inf}) {
    INFO("x = " << x);
    CHECK(exp_approx(x) == 0.0f);
  }
  for (float x : {88.38f, 88.72f, 89.0f, 1e4f, std::numeric_limits<float>::max(), inf}) {
    INFO("x = " << x);
    CHECK(exp_approx(x) == inf);
  }
  CHECK(std::isnan(exp_approx(std::numeric_limits<float>::quiet_NaN())));
  CHECK(exp_approx(0.0f) == 1.0f);
  // Between -87.68 and -87.34 the result is subnormal, still within a few 2^-149 steps.
  CHECK(std::fabs(exp_approx(-87.5f) - std::exp(-87.5)) < 4 * std::ldexp(1.0, -149));
  // The vector lanes give the same bits at the ends too.
  std::vector<float> ends = {-inf, -100.0f, -88.0f, -87.5f, 0.0f, 88.1f, 88.5f, 100.0f, inf,
                             std::numeric_limits<float>::quiet_NaN()};
  ends.resize(16, 1.0f);
  std::vector<float> got(ends.size());
  kc::detail::row_exp_store(ends.data(), 0.0f, got.data(), int64_t(ends.size()));
  for (size_t i = 0; i < ends.size(); ++i) {
    INFO("x = " << ends[i]);
    CHECK(same_bits(got[i], exp_approx(ends[i])));
  }
}

TEST_CASE("softmax family agrees within a few ulp under AVX2 and AVX-512", "[isa]") {
  for (int64_t cols : kWidths) {
    const Tensor x = randn_of({5, cols}, 41 + uint64_t(cols), 5.0);
    const Tensor gy = randn_of({5, cols}, 43 + uint64_t(cols));
    BothIsas r = run_both([&] {
      Tensor y = empty({5, cols}), ly = empty({5, cols});
      Tensor gx = empty({5, cols}), lgx = empty({5, cols});
      kc::softmax(x, y);
      kc::log_softmax(x, ly);
      kc::softmax_backward(y, gy, gx);
      kc::log_softmax_backward(ly, gy, lgx);
      Tensor y16 = empty({5, cols}, {.dtype = DType::bf16});
      kc::softmax(x.to(DType::bf16), y16);
      return std::vector<std::vector<float>>{floats(y), floats(ly), floats(gx), floats(lgx),
                                             floats(y16)};
    });
    INFO("cols = " << cols);
    // Row sums in 16 lanes instead of 8 move results by a few f32 ulp (rtol 1e-6); log-softmax
    // and the backwards subtract such sums, hence the absolute part.
    expect_near(r, 1e-6, 1e-6, "softmax");
  }
}

TEST_CASE("layer norm agrees within a few ulp under AVX2 and AVX-512", "[isa]") {
  for (int64_t C : kWidths) {
    const Tensor x = randn_of({6, C}, 51 + uint64_t(C), 2.0);
    const Tensor w = randn_of({C}, 52), b = randn_of({C}, 53), gy = randn_of({6, C}, 54);
    BothIsas r = run_both([&] {
      Tensor y = empty({6, C}), mean = empty({6}), rstd = empty({6});
      kc::layer_norm(x, w, b, 1e-5, y, mean, rstd);
      Tensor gx = empty({6, C}), gw = empty({C}), gb = empty({C});
      kc::layer_norm_backward(gy, x, w, mean, rstd, gx, gw, gb);
      return std::vector<std::vector<float>>{floats(y),  floats(mean), floats(rstd),
                                             floats(gx), floats(gw),   floats(gb)};
    });
    INFO("C = " << C);
    // The mean's and the variance's sums change order with the lane count (rtol 1e-6, plus an
    // absolute part for outputs that cancel to near zero).
    expect_near(r, 1e-6, 1e-6, "layer_norm");
  }
}
