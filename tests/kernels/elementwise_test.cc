// Tests for the CPU element-wise kernels (unary, binary, where, clamp) against scalar reference
// loops in double, on odd sizes, broadcast / transposed / sliced views and every dtype.
// Tolerances: |got - ref| <= rtol * |ref| + atol with f32 rtol 1e-6, atol 1e-7 (values are O(1);
// atol covers results near 0 whose conditioning exceeds f32's), f16 rtol 1e-3, bf16 rtol 8e-3 (their
// rounding), atol 1e-6. Integer and bool results are exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/math.h"
#include "tests/kernels/kernel_test_util.h"

namespace {

using namespace tessera;
using namespace tessera::kernel_test;
using tessera::kernels::BinaryOp;
using tessera::kernels::UnaryOp;
namespace cpu = tessera::kernels::cpu;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Input views of one dtype: contiguous of odd sizes, transposed, broadcast, sliced.
std::vector<std::pair<std::string, Tensor>> unary_inputs(DType dt, double lo, double hi, bool large) {
  std::vector<std::pair<std::string, Tensor>> in;
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(33)}) {
    in.emplace_back("contiguous " + std::to_string(n), uniform_tensor({n}, dt, lo, hi, uint32_t(n)));
  }
  if (large) in.emplace_back("contiguous 1000003", uniform_tensor({1000003}, dt, lo, hi, 3));
  in.emplace_back("transposed", uniform_tensor({33, 65}, dt, lo, hi, 4).transpose(0, 1));
  in.emplace_back("broadcast", uniform_tensor({1, 33}, dt, lo, hi, 5).expand({17, 33}));
  in.emplace_back("sliced", uniform_tensor({20, 66}, dt, lo, hi, 6).slice(1, 1, 66, 2).slice(0, 3, 20, 3));
  return in;
}

struct UnaryCase {
  UnaryOp op;
  double lo, hi;
  std::function<double(double)> ref;
};

double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double gelu_erf_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<UnaryCase> float_unary_cases() {
  return {
      {UnaryOp::neg, -6, 6, [](double x) { return -x; }},
      {UnaryOp::abs, -6, 6, [](double x) { return std::fabs(x); }},
      {UnaryOp::exp, -30, 30, [](double x) { return std::exp(x); }},
      {UnaryOp::log, 0.01, 50, [](double x) { return std::log(x); }},
      {UnaryOp::sqrt, 0, 50, [](double x) { return std::sqrt(x); }},
      {UnaryOp::rsqrt, 0.01, 50, [](double x) { return 1.0 / std::sqrt(x); }},
      {UnaryOp::tanh, -6, 6, [](double x) { return std::tanh(x); }},
      {UnaryOp::sigmoid, -20, 20, sigmoid_ref},
      {UnaryOp::relu, -6, 6, [](double x) { return x < 0 ? 0.0 : x; }},
      {UnaryOp::gelu_tanh, -8, 8, gelu_tanh_ref},
      {UnaryOp::gelu_erf, -8, 8, gelu_erf_ref},
      {UnaryOp::silu, -20, 20, [](double x) { return x * sigmoid_ref(x); }},
      {UnaryOp::sin, -6, 6, [](double x) { return std::sin(x); }},
      {UnaryOp::cos, -6, 6, [](double x) { return std::cos(x); }},
      {UnaryOp::reciprocal, 0.1, 5, [](double x) { return 1.0 / x; }},
      {UnaryOp::square, -6, 6, [](double x) { return x * x; }},
      {UnaryOp::sign, -6, 6, [](double x) { return double((x > 0) - (x < 0)); }},
  };
}

void check_unary(UnaryOp op, const Tensor& x, const std::function<double(double)>& ref, Tol tol,
                 const std::string& what) {
  Tensor out = empty(x.shape(), {.dtype = op == UnaryOp::logical_not ? DType::b8 : x.dtype()});
  cpu::unary(op, x, out);
  std::vector<double> in = values(x), want(in.size());
  for (size_t i = 0; i < in.size(); ++i) want[i] = round_to(out.dtype(), ref(in[i]));
  check_close(values(out), want, tol, what);
}

TEST_CASE("unary floating ops match double references on every layout", "[elementwise]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const UnaryCase& c : float_unary_cases()) {
      for (const auto& [layout, x] : unary_inputs(dt, c.lo, c.hi, dt == DType::f32)) {
        check_unary(c.op, x, c.ref, tol_for(dt),
                    std::string(cpu::unary_op_name(c.op)) + " " + dtype_name(dt) + " " + layout);
      }
    }
  }
}

TEST_CASE("exp, tanh, sigmoid, GELU and SiLU are accurate over dense sweeps", "[elementwise]") {
  auto sweep = [](double lo, double hi, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(lo + (hi - lo) * double(i) / double(n - 1));
    return from_vector(v, {n});
  };
  // exp over its whole range, subnormal results included (absolute 1e-45 is the smallest subnormal).
  check_unary(UnaryOp::exp, sweep(-104, 89, 400001), [](double x) { return std::exp(x); }, {1e-6, 1.5e-45},
              "exp sweep");
  check_unary(UnaryOp::tanh, sweep(-12, 12, 200001), [](double x) { return std::tanh(x); }, {1e-6, 0},
              "tanh sweep");
  check_unary(UnaryOp::tanh, sweep(-0.7, 0.7, 200001), [](double x) { return std::tanh(x); }, {1e-6, 0},
              "tanh sweep near 0 (series branch)");
  check_unary(UnaryOp::sigmoid, sweep(-80, 80, 200001), sigmoid_ref, {1e-6, 1e-38}, "sigmoid sweep");
  check_unary(UnaryOp::gelu_tanh, sweep(-12, 12, 200001), gelu_tanh_ref, {1e-6, 1e-7}, "gelu_tanh sweep");
  check_unary(UnaryOp::gelu_erf, sweep(-12, 12, 200001), gelu_erf_ref, {1e-6, 1e-7}, "gelu_erf sweep");
  check_unary(UnaryOp::silu, sweep(-60, 60, 200001), [](double x) { return x * sigmoid_ref(x); }, {1e-6, 1e-7},
              "silu sweep");
}

TEST_CASE("unary special values: inf, NaN, tiny inputs", "[elementwise]") {
  const std::vector<float> xs = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, 1e-30f, -1e-20f, 200.0f, -200.0f};
  Tensor x = from_vector(xs, {int64_t(xs.size())});
  auto run = [&](UnaryOp op) {
    Tensor out = empty_like(x);
    cpu::unary(op, x, out);
    return values(out);
  };
  std::vector<double> e = run(UnaryOp::exp);
  CHECK(e[0] == 0.0);
  CHECK(e[1] == kInf);
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == 1.0);
  CHECK(e[7] == kInf);
  CHECK(e[8] == 0.0);
  std::vector<double> t = run(UnaryOp::tanh);
  CHECK(t[0] == -1.0);
  CHECK(t[1] == 1.0);
  CHECK(std::isnan(t[2]));
  CHECK(t[5] == double(1e-30f));  // the series branch keeps tiny inputs exact
  CHECK(t[6] == double(-1e-20f));
  std::vector<double> s = run(UnaryOp::sigmoid);
  CHECK(s[0] == 0.0);
  CHECK(s[1] == 1.0);
  CHECK(std::isnan(s[2]));
  std::vector<double> r = run(UnaryOp::relu);
  CHECK(std::isnan(r[2]));  // NaN passes through relu, like PyTorch
  CHECK(r[0] == 0.0);
  std::vector<double> sg = run(UnaryOp::sign);
  CHECK(sg[0] == -1.0);
  CHECK(sg[2] == 0.0);  // PyTorch's sign(NaN)
  CHECK(sg[3] == 0.0);
}

TEST_CASE("unary integer ops are exact and negation wraps", "[elementwise]") {
  for (DType dt : {DType::i32, DType::i64}) {
    Tensor x = int_tensor({1001}, dt, -50, 50, 11);
    check_unary(UnaryOp::neg, x, [](double v) { return -v; }, {}, "neg int");
    check_unary(UnaryOp::abs, x, [](double v) { return std::fabs(v); }, {}, "abs int");
    check_unary(UnaryOp::square, x, [](double v) { return v * v; }, {}, "square int");
    check_unary(UnaryOp::sign, x, [](double v) { return double((v > 0) - (v < 0)); }, {}, "sign int");
    check_unary(UnaryOp::relu, x, [](double v) { return v < 0 ? 0.0 : v; }, {}, "relu int");
    check_unary(UnaryOp::logical_not, x, [](double v) { return v == 0 ? 1.0 : 0.0; }, {}, "logical_not int");
    check_unary(UnaryOp::neg, x.slice(0, 1, 1001, 7), [](double v) { return -v; }, {},
                "neg int sliced");
  }
  Tensor mn = from_vector<int32_t>({std::numeric_limits<int32_t>::min(), 5}, {2}, {.dtype = DType::i32});
  Tensor out = empty_like(mn);
  cpu::unary(UnaryOp::neg, mn, out);
  CHECK(out.data<int32_t>()[0] == std::numeric_limits<int32_t>::min());
  CHECK(out.data<int32_t>()[1] == -5);
  Tensor b = from_vector<bool>({true, false, true}, {3}, {.dtype = DType::b8});
  check_unary(UnaryOp::logical_not, b, [](double v) { return v == 0 ? 1.0 : 0.0; }, {}, "logical_not bool");
  check_unary(UnaryOp::logical_not, uniform_tensor({7}, DType::f32, -1, 1, 2).slice(0, 0, 7, 2),
              [](double v) { return v == 0 ? 1.0 : 0.0; }, {}, "logical_not f32");
}

TEST_CASE("unary refuses unsupported dtypes and mismatched outputs clearly", "[elementwise]") {
  Tensor xi = zeros({4}, {.dtype = DType::i64});
  Tensor oi = empty_like(xi);
  CHECK_THROWS_AS(cpu::unary(UnaryOp::exp, xi, oi), ValueError);
  CHECK_THROWS_WITH(cpu::unary(UnaryOp::exp, xi, oi), Catch::Contains("[exp]") && Catch::Contains("floating") &&
                                                        Catch::Contains("i64"));
  Tensor xb = zeros({4}, {.dtype = DType::b8});
  Tensor ob = empty_like(xb);
  CHECK_THROWS_WITH(cpu::unary(UnaryOp::neg, xb, ob), Catch::Contains("[neg]") && Catch::Contains("numeric") &&
                                                        Catch::Contains("bool"));
  Tensor x = zeros({4});
  CHECK_THROWS_AS(cpu::unary(UnaryOp::exp, x, zeros({5})), ValueError);
  CHECK_THROWS_AS(cpu::unary(UnaryOp::exp, x, zeros({4}, {.dtype = DType::f16})), ValueError);
  CHECK_THROWS_AS(cpu::unary(UnaryOp::logical_not, x, zeros({4})), ValueError);
}

TEST_CASE("unary writes into strided outputs and in place", "[elementwise]") {
  Tensor x = uniform_tensor({40, 30}, DType::f32, -3, 3, 21);
  Tensor out_t = empty({30, 40}).transpose(0, 1);  // non-contiguous output
  cpu::unary(UnaryOp::gelu_tanh, x, out_t);
  std::vector<double> in = values(x), want(in.size());
  for (size_t i = 0; i < in.size(); ++i) want[i] = gelu_tanh_ref(in[i]);
  check_close(values(out_t), want, tol_for(DType::f32), "gelu into transposed out");
  cpu::unary(UnaryOp::gelu_tanh, x, x);  // in place
  check_close(values(x), want, tol_for(DType::f32), "gelu in place");
}

}  // namespace
