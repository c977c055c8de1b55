// Tests for the CPU binary element-wise kernels, where and clamp against scalar reference loops in
// double: odd sizes, broadcast operands (stride 0 rows, columns and scalars), transposed and sliced
// views, every dtype. Tolerances as in kernel_test_util.h: f32 rtol 1e-6 / atol 1e-7, f16 rtol 1e-3,
// bf16 rtol 8e-3; integer, bool and comparison results exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/factory.h"
#include "kernels/cpu/elementwise.h"
#include "tests/kernels/kernel_test_util.h"

namespace {

using namespace tessera;
using namespace tessera::kernel_test;
using tessera::kernels::BinaryOp;
namespace cpu = tessera::kernels::cpu;

using Ref2 = std::function<double(double, double)>;
using MakeInput = std::function<Tensor(const Shape&, uint32_t)>;

struct Pair {
  std::string name;
  Tensor a, b;
};

// Operand pairs in every layout the loops special-case, plus the general strided one.
std::vector<Pair> operand_pairs(const MakeInput& make, bool large) {
  std::vector<Pair> p;
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(33)}) {
    p.push_back({"contiguous " + std::to_string(n), make({n}, 1), make({n}, 2)});
  }
  if (large) p.push_back({"contiguous 1000003", make({1000003}, 3), make({1000003}, 4)});
  p.push_back({"row broadcast b", make({17, 33}, 5), make({1, 33}, 6).expand({17, 33})});
  p.push_back({"column broadcast b", make({17, 33}, 7), make({17, 1}, 8).expand({17, 33})});
  p.push_back({"scalar a", make({1, 1}, 9).expand({17, 33}), make({17, 33}, 10)});
  p.push_back({"transposed a, sliced b", make({33, 17}, 11).transpose(0, 1),
               make({34, 66}, 12).slice(1, 0, 66, 2).slice(0, 1, 35, 2)});
  p.push_back({"long broadcast row", make({1, 70001}, 13).expand({3, 70001}), make({3, 70001}, 14)});
  return p;
}

void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype, const Ref2& ref, Tol tol,
                  const std::string& what) {
  Tensor out = empty(a.shape(), {.dtype = out_dtype});
  cpu::binary(op, a, b, out);
  std::vector<double> va = values(a), vb = values(b), want(va.size());
  for (size_t i = 0; i < va.size(); ++i) want[i] = round_to(out_dtype, ref(va[i], vb[i]));
  check_close(values(out), want, tol, what);
}

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_tanh_grad_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}
double gelu_erf_grad_ref(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

TEST_CASE("binary arithmetic on floats matches double references on every layout", "[elementwise]") {
  struct Case {
    BinaryOp op;
    double alo, ahi, blo, bhi;
    Ref2 ref;
  };
  const std::vector<Case> cases = {
      {BinaryOp::add, -5, 5, -5, 5, [](double x, double y) { return x + y; }},
      {BinaryOp::sub, -5, 5, -5, 5, [](double x, double y) { return x - y; }},
      {BinaryOp::mul, -5, 5, -5, 5, [](double x, double y) { return x * y; }},
      {BinaryOp::div, -5, 5, 0.5, 3, [](double x, double y) { return x / y; }},
      {BinaryOp::pow, 0.1, 4, -2, 2, [](double x, double y) { return std::pow(x, y); }},
      {BinaryOp::maximum, -5, 5, -5, 5, [](double x, double y) { return std::max(x, y); }},
      {BinaryOp::minimum, -5, 5, -5, 5, [](double x, double y) { return std::min(x, y); }},
      // Backward helpers: a is the forward input (or output y), b the incoming gradient.
      {BinaryOp::relu_backward, -3, 3, -2, 2, [](double x, double g) { return x > 0 ? g : 0.0; }},
      {BinaryOp::gelu_tanh_backward, -6, 6, -2, 2, [](double x, double g) { return g * gelu_tanh_grad_ref(x); }},
      {BinaryOp::gelu_erf_backward, -6, 6, -2, 2, [](double x, double g) { return g * gelu_erf_grad_ref(x); }},
      {BinaryOp::silu_backward, -20, 20, -2, 2,
       [](double x, double g) { return g * sig(x) * (1.0 + x * (1.0 - sig(x))); }},
      {BinaryOp::sigmoid_backward, 0, 1, -2, 2, [](double y, double g) { return g * y * (1.0 - y); }},
      {BinaryOp::tanh_backward, -1, 1, -2, 2, [](double y, double g) { return g * (1.0 - y * y); }},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    // Backward formulas lose up to an f32 ulp of their O(1) factors to cancellation: atol 2e-7.
    Tol tol = tol_for(dt);
    if (dt == DType::f32) tol.atol = 2e-7;
    for (const Case& c : cases) {
      MakeInput make = [&](const Shape& s, uint32_t seed) {
        const bool is_b = seed % 2 == 0;
        return uniform_tensor(s, dt, is_b ? c.blo : c.alo, is_b ? c.bhi : c.ahi, seed);
      };
      for (const Pair& p : operand_pairs(make, dt == DType::f32)) {
        check_binary(c.op, p.a, p.b, dt, c.ref, tol,
                     std::string(cpu::binary_op_name(c.op)) + " " + dtype_name(dt) + " " + p.name);
      }
    }
  }
}

TEST_CASE("comparisons and logic write exact bools for every dtype", "[elementwise]") {
  const std::vector<std::pair<BinaryOp, Ref2>> cases = {
      {BinaryOp::eq, [](double x, double y) { return double(x == y); }},
      {BinaryOp::ne, [](double x, double y) { return double(x != y); }},
      {BinaryOp::lt, [](double x, double y) { return double(x < y); }},
      {BinaryOp::le, [](double x, double y) { return double(x <= y); }},
      {BinaryOp::gt, [](double x, double y) { return double(x > y); }},
      {BinaryOp::ge, [](double x, double y) { return double(x >= y); }},
      {BinaryOp::logical_and, [](double x, double y) { return double(x != 0 && y != 0); }},
      {BinaryOp::logical_or, [](double x, double y) { return double(x != 0 || y != 0); }},
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8}) {
    const int hi = dt == DType::b8 ? 1 : 3;
    MakeInput make = [&](const Shape& s, uint32_t seed) { return int_tensor(s, dt, 0, hi, seed); };
    for (const auto& [op, ref] : cases) {
      for (const Pair& p : operand_pairs(make, false)) {
        check_binary(op, p.a, p.b, DType::b8, ref, {},
                     std::string(cpu::binary_op_name(op)) + " " + dtype_name(dt) + " " + p.name);
      }
    }
  }
}

TEST_CASE("integer arithmetic is exact and wraps on overflow", "[elementwise]") {
  for (DType dt : {DType::i32, DType::i64}) {
    MakeInput make = [&](const Shape& s, uint32_t seed) { return int_tensor(s, dt, -1000, 1000, seed); };
    const std::vector<std::pair<BinaryOp, Ref2>> cases = {
        {BinaryOp::add, [](double x, double y) { return x + y; }},
        {BinaryOp::sub, [](double x, double y) { return x - y; }},
        {BinaryOp::mul, [](double x, double y) { return x * y; }},
        {BinaryOp::maximum, [](double x, double y) { return std::max(x, y); }},
        {BinaryOp::minimum, [](double x, double y) { return std::min(x, y); }},
    };
    for (const auto& [op, ref] : cases) {
      for (const Pair& p : operand_pairs(make, dt == DType::i64)) {
        check_binary(op, p.a, p.b, dt, ref, {},
                     std::string(cpu::binary_op_name(op)) + " " + dtype_name(dt) + " " + p.name);
      }
    }
  }
  const int32_t big = std::numeric_limits<int32_t>::max();
  Tensor a = from_vector<int32_t>({big, -big}, {2}, {.dtype = DType::i32});
  Tensor b = from_vector<int32_t>({1, 2}, {2}, {.dtype = DType::i32});
  Tensor out = empty_like(a);
  cpu::binary(BinaryOp::add, a, b, out);
  CHECK(out.data<int32_t>()[0] == std::numeric_limits<int32_t>::min());
  cpu::binary(BinaryOp::sub, a, b, out);
  CHECK(out.data<int32_t>()[1] == big);  // -big - 2 wraps to big
}

TEST_CASE("maximum and minimum propagate NaN like PyTorch", "[elementwise]") {
  Tensor a = from_vector({NAN, 1.0f, NAN, -INFINITY}, {4});
  Tensor b = from_vector({2.0f, NAN, NAN, 3.0f}, {4});
  for (BinaryOp op : {BinaryOp::maximum, BinaryOp::minimum}) {
    Tensor out = empty_like(a);
    cpu::binary(op, a, b, out);
    std::vector<double> v = values(out);
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(std::isnan(v[2]));
    CHECK(v[3] == (op == BinaryOp::maximum ? 3.0 : -INFINITY));
  }
}

TEST_CASE("binary refuses bad dtypes and shapes clearly", "[elementwise]") {
  Tensor ai = zeros({3}, {.dtype = DType::i64});
  Tensor oi = empty_like(ai);
  CHECK_THROWS_WITH(cpu::binary(BinaryOp::div, ai, ai, oi), Catch::Contains("[div]") && Catch::Contains("floating"));
  CHECK_THROWS_WITH(cpu::binary(BinaryOp::pow, ai, ai, oi), Catch::Contains("[pow]"));
  Tensor ab = zeros({3}, {.dtype = DType::b8});
  CHECK_THROWS_WITH(cpu::binary(BinaryOp::add, ab, ab, empty_like(ab)),
                    Catch::Contains("[add]") && Catch::Contains("numeric"));
  Tensor a = zeros({3}), b = zeros({3});
  CHECK_THROWS_AS(cpu::binary(BinaryOp::add, a, ai, empty_like(a)), ValueError);       // dtypes differ
  CHECK_THROWS_AS(cpu::binary(BinaryOp::add, a, zeros({4}), empty_like(a)), ValueError);  // shapes differ
  CHECK_THROWS_AS(cpu::binary(BinaryOp::lt, a, b, empty_like(a)), ValueError);           // needs bool out
  CHECK_THROWS_AS(cpu::binary(BinaryOp::add, a, b, empty_like(ab)), ValueError);
}

TEST_CASE("where selects per element with broadcast operands in every dtype", "[elementwise]") {
  for (DType dt : {DType::f32, DType::bf16, DType::i32, DType::i64, DType::b8}) {
    const Shape shape = {9, 1001};
    Tensor cond = int_tensor({1, 1001}, DType::b8, 0, 1, 1).expand(shape);
    Tensor a = int_tensor({1001, 9}, dt, -50, 50, 2).transpose(0, 1);
    Tensor b = int_tensor({9, 1}, dt, -50, 50, 3).expand(shape);
    Tensor out = empty(shape, {.dtype = dt});
    kernels::cpu::where(cond, a, b, out);
    std::vector<double> c = values(cond), va = values(a), vb = values(b), want(c.size());
    for (size_t i = 0; i < c.size(); ++i) want[i] = c[i] != 0 ? va[i] : vb[i];
    check_close(values(out), want, {}, std::string("where ") + dtype_name(dt));
    Tensor ca = int_tensor(shape, DType::b8, 0, 1, 4), xa = int_tensor(shape, dt, -5, 5, 5),
           xb = int_tensor(shape, dt, -5, 5, 6);  // all contiguous
    kernels::cpu::where(ca, xa, xb, out);
    c = values(ca), va = values(xa), vb = values(xb);
    for (size_t i = 0; i < c.size(); ++i) want[i] = c[i] != 0 ? va[i] : vb[i];
    check_close(values(out), want, {}, std::string("where contiguous ") + dtype_name(dt));
  }
  Tensor x = zeros({3});
  CHECK_THROWS_AS(kernels::cpu::where(x, x, x, empty_like(x)), ValueError);  // cond must be bool
}

TEST_CASE("clamp handles missing bounds, lo > hi, NaN and integer bounds", "[elementwise]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto ref_clamp = [](double v, double lo, double hi) {
    if (std::isnan(v)) return v;
    double t = !std::isnan(lo) && v < lo ? lo : v;
    return !std::isnan(hi) && t > hi ? hi : t;
  };
  const std::vector<std::pair<double, double>> bounds = {{-1.5, 2.25}, {nan, 0.5}, {0.5, nan}, {nan, nan}, {3, -3}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    Tensor x = uniform_tensor({1000003}, dt, -5, 5, 7);
    Tensor xt = uniform_tensor({21, 33}, dt, -5, 5, 8).transpose(0, 1);
    for (auto [lo, hi] : bounds) {
      for (const Tensor& in : {x, xt}) {
        Tensor out = empty(in.shape(), {.dtype = dt});
        kernels::cpu::clamp(in, lo, hi, out);
        std::vector<double> v = values(in), want(v.size());
        for (size_t i = 0; i < v.size(); ++i) want[i] = round_to(dt, ref_clamp(v[i], lo, hi));
        check_close(values(out), want, {}, std::string("clamp ") + dtype_name(dt));
      }
    }
  }
  Tensor xn = from_vector({NAN, -7.0f, 7.0f}, {3});
  Tensor on = empty_like(xn);
  kernels::cpu::clamp(xn, -1, 1, on);
  CHECK(std::isnan(values(on)[0]));
  CHECK(values(on)[1] == -1.0);
  Tensor xi = from_vector<int64_t>({-5, 0, 1, 2, 5}, {5}, {.dtype = DType::i64});
  Tensor oi = empty_like(xi);
  kernels::cpu::clamp(xi, 0.5, 1.5, oi);  // integer bounds: ceil(lo) = 1, floor(hi) = 1
  CHECK(values(oi) == std::vector<double>{1, 1, 1, 1, 1});
  kernels::cpu::clamp(xi, -1e30, nan, oi);  // saturating bound, no upper bound
  CHECK(values(oi) == std::vector<double>{-5, 0, 1, 2, 5});
  CHECK_THROWS_AS(kernels::cpu::clamp(zeros({2}, {.dtype = DType::b8}), 0, 1, zeros({2}, {.dtype = DType::b8})),
                  ValueError);
}

}  // namespace
