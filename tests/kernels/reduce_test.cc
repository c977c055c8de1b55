// Tests for the CPU reductions against reference loops in double: every op over dims (0), (1), (2),
// (0, 1), (0, 2), (1, 2) and all of a 3-D tensor in contiguous, permuted and sliced layouts, large
// reductions on the threaded split paths, 16-bit floats, integers, NaN and tie rules, errors.
// Tolerances: sums and means within rtol * sum|x| (f32 rtol 1e-6, f16 1e-3, bf16 8e-3); var and
// norms within 2e-6 (f32) of the reference; max/min/argmax/argmin and integer results exact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/reduce.h"
#include "tests/kernels/kernel_test_util.h"

namespace {

using namespace tessera;
using namespace tessera::kernel_test;
using tessera::kernels::ReduceOp;
namespace cpu = tessera::kernels::cpu;

constexpr double kInf = std::numeric_limits<double>::infinity();

Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape s = shape;
  for (int64_t d : dims) s[size_t(d)] = 1;
  return s;
}

// The values reduced into each output (keepdim, row-major order), each in row-major order of the
// reduced dims, so a value's position is its index along a single reduced dim.
std::vector<std::vector<double>> groups(const Tensor& x, const std::vector<int64_t>& dims) {
  const std::vector<double> v = values(x);
  const Shape& shape = x.shape();
  const Shape out_shape = keepdim_shape(shape, dims);
  std::vector<std::vector<double>> g(size_t(shape_numel(out_shape)));
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) o = o * out_shape[d] + (out_shape[d] == 1 ? 0 : idx[d]);
    g[size_t(o)].push_back(v[i]);
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  return g;
}

double ref_reduce(ReduceOp op, const std::vector<double>& g, double param) {
  const double n = double(g.size());
  double sum = 0;
  for (double v : g) sum += v;
  switch (op) {
    case ReduceOp::sum: return sum;
    case ReduceOp::mean: return sum / n;
    case ReduceOp::max:
    case ReduceOp::min: {
      double best = g[0];
      for (double v : g) {
        if (std::isnan(v)) return v;
        best = op == ReduceOp::max ? std::max(best, v) : std::min(best, v);
      }
      return best;
    }
    case ReduceOp::argmax:
    case ReduceOp::argmin: {
      size_t best = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        if (std::isnan(g[i])) return double(i);
        if (op == ReduceOp::argmax ? g[i] > g[best] : g[i] < g[best]) best = i;
      }
      return double(best);
    }
    case ReduceOp::var: {
      double ss = 0;
      for (double v : g) ss += (v - sum / n) * (v - sum / n);
      return ss / std::max(0.0, n - param);
    }
    case ReduceOp::norm: {
      double acc = 0;
      for (double v : g) acc = std::isinf(param) ? std::max(acc, std::fabs(v)) : acc + std::pow(std::fabs(v), param);
      return std::isinf(param) ? acc : std::pow(acc, 1.0 / param);
    }
  }
  return 0;
}

// Error allowed for one output: sums scale with sum|x|, the rest with the result.
double allowed(ReduceOp op, const std::vector<double>& g, double ref, DType dt) {
  const bool f32 = dt == DType::f32;
  const double rtol = f32 ? 1e-6 : (dt == DType::f16 ? 1e-3 : 8e-3);
  double abs_sum = 0;
  for (double v : g) abs_sum += std::fabs(v);
  switch (op) {
    case ReduceOp::sum: return rtol * abs_sum + 1e-30;
    case ReduceOp::mean: return rtol * abs_sum / double(g.size()) + 1e-30;
    case ReduceOp::var:
    case ReduceOp::norm: return (f32 ? 2e-6 : rtol) * std::fabs(ref) + 1e-30;
    default: return 0.0;
  }
}

void check_reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, double param,
                  const std::string& what, DType out_dtype, const Tensor* out_view = nullptr) {
  const bool is_arg = op == ReduceOp::argmax || op == ReduceOp::argmin;
  Tensor out = out_view ? *out_view : empty(keepdim_shape(x.shape(), dims), {.dtype = out_dtype});
  cpu::reduce(op, x, dims, out, param);
  const std::vector<std::vector<double>> g = groups(x, dims);
  const std::vector<double> got = values(out);
  REQUIRE(got.size() == g.size());
  for (size_t m = 0; m < g.size(); ++m) {
    const double ref = is_arg ? ref_reduce(op, g[m], param) : round_to(out_dtype, ref_reduce(op, g[m], param));
    const double tol = allowed(op, g[m], ref, x.dtype());
    const bool ok = std::isnan(ref) ? std::isnan(got[m]) : std::fabs(got[m] - ref) <= tol;
    if (!ok) {
      INFO(what << ": output " << m << " got " << got[m] << ", expected " << ref << " (tolerance " << tol << ")");
      REQUIRE(ok);
    }
  }
}

// Every op with the params the tests sweep (var correction, norm p).
std::vector<std::pair<ReduceOp, double>> all_ops() {
  return {{ReduceOp::sum, 0},  {ReduceOp::mean, 0}, {ReduceOp::max, 0},  {ReduceOp::min, 0},
          {ReduceOp::var, 0},  {ReduceOp::var, 1},  {ReduceOp::norm, 1}, {ReduceOp::norm, 2},
          {ReduceOp::norm, 3}, {ReduceOp::norm, kInf}};
}

std::string label(ReduceOp op, double param, DType dt, const std::string& layout, const std::vector<int64_t>& dims) {
  std::string s = std::string(cpu::reduce_op_name(op)) + "(" + std::to_string(param) + ") " + dtype_name(dt) + " " +
                  layout + " dims";
  for (int64_t d : dims) s += " " + std::to_string(d);
  return s;
}

// (5, 7, 33) views: contiguous, permuted (no dims mergeable), sliced (steps in two dims).
std::vector<std::pair<std::string, Tensor>> layouts_3d(DType dt) {
  return {
      {"contiguous", uniform_tensor({5, 7, 33}, dt, -3, 3, 1)},
      {"permuted", uniform_tensor({7, 5, 33}, dt, -3, 3, 2).permute({1, 0, 2})},
      {"transposed inner", uniform_tensor({33, 5, 7}, dt, -3, 3, 3).permute({1, 2, 0})},
      {"sliced", uniform_tensor({10, 7, 66}, dt, -3, 3, 4).slice(0, 0, 10, 2).slice(2, 1, 66, 2)},
  };
}

const std::vector<std::vector<int64_t>> kDimSets = {{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};

TEST_CASE("every reduction over every dim set and layout of a 3-D tensor", "[reduce]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const auto& [layout, x] : layouts_3d(dt)) {
      for (const auto& dims : kDimSets) {
        for (auto [op, param] : all_ops()) check_reduce(op, x, dims, param, label(op, param, dt, layout, dims), dt);
        if (dims.size() == 1) {
          for (ReduceOp op : {ReduceOp::argmax, ReduceOp::argmin}) {
            check_reduce(op, x, dims, 0, label(op, 0, dt, layout, dims), DType::i64);
          }
        }
      }
    }
  }
}

TEST_CASE("reductions write into non-contiguous outputs", "[reduce]") {
  Tensor x = uniform_tensor({6, 9, 4}, DType::f32, -2, 2, 5);
  Tensor out = empty({4, 1, 6}).permute({2, 1, 0});  // (6, 1, 4), transposed strides
  check_reduce(ReduceOp::sum, x, {1}, 0, "sum into permuted out", DType::f32, &out);
  Tensor idx = empty({4, 1, 6}, {.dtype = DType::i64}).permute({2, 1, 0});
  check_reduce(ReduceOp::argmax, x, {1}, 0, "argmax into permuted out", DType::i64, &idx);
}

TEST_CASE("large reductions stay accurate on every threaded path and thread count", "[reduce]") {
  const int saved = num_threads();
  for (int threads : {1, 3, saved}) {
    set_num_threads(threads);
    const std::string t = " threads " + std::to_string(threads);
    // Positive values: a naive f32 running sum of 1e6 of them is off by ~1e-4 relative.
    Tensor pos = uniform_tensor({1000003}, DType::f32, 0, 1, 7);
    for (auto [op, param] : all_ops()) check_reduce(op, pos, {0}, param, label(op, param, DType::f32, "1e6" + t, {0}), DType::f32);
    check_reduce(ReduceOp::argmax, pos, {0}, 0, "argmax 1e6" + t, DType::i64);
    check_reduce(ReduceOp::argmin, pos, {0}, 0, "argmin 1e6" + t, DType::i64);
    Tensor tall = uniform_tensor({333337, 3}, DType::f32, 0, 1, 8);  // columns: few, long
    for (auto [op, param] : all_ops()) check_reduce(op, tall, {0}, param, label(op, param, DType::f32, "tall" + t, {0}), DType::f32);
    Tensor wide = uniform_tensor({3, 333337}, DType::f32, 0, 1, 9);  // rows: few, long
    for (auto [op, param] : all_ops()) check_reduce(op, wide, {1}, param, label(op, param, DType::f32, "wide" + t, {1}), DType::f32);
    check_reduce(ReduceOp::argmax, wide, {1}, 0, "argmax wide" + t, DType::i64);
    Tensor many = uniform_tensor({4099, 257}, DType::f32, -1, 1, 10);  // many outputs either way
    for (int64_t d : {0, 1}) check_reduce(ReduceOp::sum, many, {d}, 0, "sum many" + t, DType::f32);
    check_reduce(ReduceOp::argmin, many, {0}, 0, "argmin many" + t, DType::i64);
  }
  set_num_threads(saved);
}

TEST_CASE("max, min, argmax and argmin: NaN propagates and ties take the first index", "[reduce]") {
  // rows: no NaN with ties, one NaN, two NaNs
  Tensor x = from_vector({1.0f, 3.0f, 3.0f, -2.0f, -2.0f,  //
                          1.0f, NAN, 5.0f, -9.0f, 0.0f,    //
                          NAN, 2.0f, NAN, 0.0f, 7.0f},
                         {3, 5});
  for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
    Tensor out = empty({3, 1});
    cpu::reduce(op, x, {1}, out);
    std::vector<double> v = values(out);
    CHECK(v[0] == (op == ReduceOp::max ? 3.0 : -2.0));
    CHECK(std::isnan(v[1]));
    CHECK(std::isnan(v[2]));
    Tensor col = empty({1, 5});  // the column path
    cpu::reduce(op, x, {0}, col);
    std::vector<double> c = values(col);
    CHECK(std::isnan(c[1]));
    CHECK(std::isnan(c[2]));
    CHECK(c[3] == (op == ReduceOp::max ? 0.0 : -9.0));
  }
  Tensor am = empty({3, 1}, {.dtype = DType::i64});
  cpu::reduce(ReduceOp::argmax, x, {1}, am);
  CHECK(values(am) == std::vector<double>{1, 1, 0});
  cpu::reduce(ReduceOp::argmin, x, {1}, am);
  CHECK(values(am) == std::vector<double>{3, 1, 0});
  // Long rows split across threads: the first NaN (or first tie) must win across pieces.
  std::vector<float> big(1000003, 0.0f);
  big[400000] = 5.0f;
  big[800000] = 5.0f;
  Tensor b = from_vector(big, {1000003});
  Tensor i1 = empty({1}, {.dtype = DType::i64});
  cpu::reduce(ReduceOp::argmax, b, {0}, i1);
  CHECK(values(i1)[0] == 400000);
  big[600000] = NAN;
  big[900000] = NAN;
  b = from_vector(big, {1000003});
  cpu::reduce(ReduceOp::argmax, b, {0}, i1);
  CHECK(values(i1)[0] == 600000);
  cpu::reduce(ReduceOp::argmin, b, {0}, i1);
  CHECK(values(i1)[0] == 600000);
  Tensor m1 = empty({1});
  cpu::reduce(ReduceOp::max, b, {0}, m1);
  CHECK(std::isnan(values(m1)[0]));
  cpu::reduce(ReduceOp::norm, b, {0}, m1, kInf);
  CHECK(std::isnan(values(m1)[0]));
}

TEST_CASE("max of a row of -inf is -inf and min of a row of +inf is +inf", "[reduce]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Tensor x = from_vector({-inf, -inf, -inf, inf, inf, inf}, {2, 3}).to(dt);
    Tensor out = empty({2, 1}, {.dtype = dt});
    cpu::reduce(ReduceOp::max, x, {1}, out);
    CHECK(values(out)[0] == -inf);
    cpu::reduce(ReduceOp::min, x, {1}, out);
    CHECK(values(out)[1] == inf);
    Tensor col = empty({1, 3}, {.dtype = dt});  // the column path
    cpu::reduce(ReduceOp::max, x.narrow(0, 0, 1), {0}, col);
    CHECK(values(col)[2] == -inf);
  }
}

TEST_CASE("var corrections and degenerate sizes", "[reduce]") {
  Tensor x = from_vector({1.0f, 2.0f, 4.0f, 7.0f}, {4});
  Tensor out = empty({1});
  cpu::reduce(ReduceOp::var, x, {0}, out, 0);
  CHECK(values(out)[0] == Approx(5.25).epsilon(1e-6));
  cpu::reduce(ReduceOp::var, x, {0}, out, 1);
  CHECK(values(out)[0] == Approx(7.0).epsilon(1e-6));
  Tensor one = from_vector({3.0f}, {1});
  cpu::reduce(ReduceOp::var, one, {0}, out, 1);
  CHECK(std::isnan(values(out)[0]));  // 0 / max(0, 1 - 1), like PyTorch
  Tensor empty_x = empty({3, 0});
  Tensor o3 = empty({3, 1});
  cpu::reduce(ReduceOp::sum, empty_x, {1}, o3);
  CHECK(values(o3) == std::vector<double>{0, 0, 0});
  cpu::reduce(ReduceOp::mean, empty_x, {1}, o3);
  CHECK(std::isnan(values(o3)[0]));
  CHECK_THROWS_WITH(cpu::reduce(ReduceOp::max, empty_x, {1}, o3), Catch::Contains("[max]") && Catch::Contains("non-empty"));
}

TEST_CASE("integer and bool reductions are exact", "[reduce]") {
  for (DType dt : {DType::i32, DType::i64}) {
    for (const auto& [shape, seed] : std::vector<std::pair<Shape, uint32_t>>{{{5, 7, 33}, 1}, {{1000003}, 2}}) {
      Tensor x = int_tensor(shape, dt, -1000, 1000, seed);
      std::vector<std::vector<int64_t>> dim_sets = shape.size() == 3 ? kDimSets : std::vector<std::vector<int64_t>>{{0}};
      for (const auto& dims : dim_sets) {
        check_reduce(ReduceOp::sum, x, dims, 0, label(ReduceOp::sum, 0, dt, "int", dims), DType::i64);
        check_reduce(ReduceOp::sum, x, dims, 0, label(ReduceOp::sum, 0, dt, "int same dtype", dims), dt);
        check_reduce(ReduceOp::max, x, dims, 0, label(ReduceOp::max, 0, dt, "int", dims), dt);
        check_reduce(ReduceOp::min, x, dims, 0, label(ReduceOp::min, 0, dt, "int", dims), dt);
        if (dims.size() == 1) {
          check_reduce(ReduceOp::argmax, x, dims, 0, label(ReduceOp::argmax, 0, dt, "int", dims), DType::i64);
          check_reduce(ReduceOp::argmin, x, dims, 0, label(ReduceOp::argmin, 0, dt, "int", dims), DType::i64);
        }
      }
    }
  }
  Tensor b = int_tensor({9, 1001}, DType::b8, 0, 1, 3);
  check_reduce(ReduceOp::sum, b, {1}, 0, "bool sum rows", DType::i64);
  check_reduce(ReduceOp::sum, b, {0}, 0, "bool sum columns", DType::i64);
}

TEST_CASE("reductions refuse bad dtypes, dims and outputs clearly", "[reduce]") {
  Tensor xi = zeros({4, 3}, {.dtype = DType::i64});
  CHECK_THROWS_WITH(cpu::reduce(ReduceOp::mean, xi, {0}, zeros({1, 3}, {.dtype = DType::i64})),
                    Catch::Contains("[mean]") && Catch::Contains("floating") && Catch::Contains("i64"));
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::var, xi, {0}, zeros({1, 3}, {.dtype = DType::i64}), 1), ValueError);
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::norm, xi, {0}, zeros({1, 3}, {.dtype = DType::i64}), 2), ValueError);
  Tensor xb = zeros({4, 3}, {.dtype = DType::b8});
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::max, xb, {0}, zeros({1, 3}, {.dtype = DType::b8})), ValueError);
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::sum, xb, {0}, zeros({1, 3}, {.dtype = DType::b8})), ValueError);
  Tensor x = zeros({4, 3});
  CHECK_THROWS_WITH(cpu::reduce(ReduceOp::argmax, x, {0, 1}, zeros({1, 1}, {.dtype = DType::i64})),
                    Catch::Contains("[argmax]") && Catch::Contains("one dim"));
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::argmax, x, {0}, zeros({1, 3})), ValueError);  // needs i64
  CHECK_THROWS_WITH(cpu::reduce(ReduceOp::sum, x, {0}, zeros({3})), Catch::Contains("(1, 3)"));
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::sum, x, {1, 0}, zeros({1, 1})), ValueError);  // unsorted
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::sum, x, {2}, zeros({4, 3})), ValueError);     // out of range
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::sum, x, {}, zeros({4, 3})), ValueError);
  CHECK_THROWS_AS(cpu::reduce(ReduceOp::sum, x, {0}, zeros({1, 3}, {.dtype = DType::f16})), ValueError);
  CHECK_THROWS_WITH(cpu::reduce(ReduceOp::norm, x, {0}, zeros({1, 3}), 0.0), Catch::Contains("p > 0"));
}

}  // namespace
