// CUDA element-wise kernels against their CPU twins: every unary and binary op, where and clamp, for
// every dtype the CPU takes, on odd sizes (vector path plus tail), misaligned and transposed views
// (strided path) and broadcast operands (stride 0), within each dtype's rounding.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using kernels::BinaryOp;
using kernels::UnaryOp;
using testing::require_close;

namespace {

Tensor gpu(const Tensor& t) { return t.to(cuda_device()); }

Tensor uniform(const Shape& shape, DType dt, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  Tensor t = empty(shape);
  uniform_(t, lo, hi, &gen);
  return t.to(dt);
}

// Small integers, so comparisons see ties and logic sees zeros.
Tensor small_ints(const Shape& shape, DType dt, int lo, int hi, uint64_t seed) {
  Generator gen(seed);
  return randint(lo, hi + 1, shape, {.dtype = DType::i64}, &gen).to(dt);
}

struct Tol {
  double rtol, atol;
};

// f32: device libm (log, sin, pow, erfc) may differ from glibc by an ulp or two; 16-bit results
// may then round one ulp apart.
Tol tol_for(DType dt) {
  switch (dt) {
    case DType::f32: return {2e-5, 1e-6};
    case DType::f16: return {2e-3, 1e-4};
    case DType::bf16: return {1.6e-2, 1e-3};
    default: return {0.0, 0.0};
  }
}

// The views a test runs on: contiguous odd sizes (vector path and its tail), a misaligned 1-d
// slice, and a transposed 2-d view (strided path).
struct View {
  const char* name;
  Shape base;
  Tensor (*make)(const Tensor&);
};
const View kViews[] = {
    {"scalar", {1}, [](const Tensor& t) { return t; }},
    {"odd contiguous", {4099}, [](const Tensor& t) { return t; }},
    {"misaligned", {1025}, [](const Tensor& t) { return t.narrow(0, 1, 1023); }},
    {"transposed", {37, 65}, [](const Tensor& t) { return t.transpose(0, 1); }},
    {"empty", {0, 3}, [](const Tensor& t) { return t; }},
};

void compare_unary(UnaryOp op, const Tensor& x_cpu, const View& v, Tol tol) {
  const Tensor x = v.make(x_cpu);
  const DType out_dt = op == UnaryOp::logical_not ? DType::b8 : x.dtype();
  const Tensor ref = empty(x.shape(), {.dtype = out_dt});
  kernels::unary(op, x, ref);
  // The GPU operand is the same view of the same data.
  const Tensor x_g = v.make(gpu(x_cpu));
  const Tensor out = empty(x.shape(), {.dtype = out_dt, .device = cuda_device()});
  kernels::unary(op, x_g, out);
  require_close(out, ref, tol.rtol, tol.atol);
}

void compare_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& shape, Tol tol) {
  const bool to_bool = op >= BinaryOp::eq && op <= BinaryOp::logical_or;
  const DType out_dt = to_bool ? DType::b8 : a.dtype();
  const Tensor ref = empty(shape, {.dtype = out_dt});
  kernels::binary(op, a.expand(shape), b.expand(shape), ref);
  const Tensor out = empty(shape, {.dtype = out_dt, .device = cuda_device()});
  kernels::binary(op, gpu(a).expand(shape), gpu(b).expand(shape), out);
  require_close(out, ref, tol.rtol, tol.atol);
}

}  // namespace

TEST_CASE("cuda unary floating ops match the CPU") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (int o = 0; o <= int(UnaryOp::logical_not); ++o) {
      const UnaryOp op = UnaryOp(o);
      const bool positive = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt;
      for (const View& v : kViews) {
        INFO(dtype_name(dt) << " op " << o << " view " << v.name);
        const Tensor x = positive ? uniform(v.base, dt, 0.05, 9.0, 11 + o) : uniform(v.base, dt, -6.0, 6.0, 11 + o);
        compare_unary(op, x, v, tol_for(dt));
      }
    }
  }
}

TEST_CASE("cuda unary integer and bool ops match the CPU exactly") {
  TS_REQUIRE_GPU();
  const UnaryOp int_ops[] = {UnaryOp::neg, UnaryOp::abs, UnaryOp::square, UnaryOp::sign, UnaryOp::relu,
                             UnaryOp::logical_not};
  for (DType dt : {DType::i32, DType::i64}) {
    for (UnaryOp op : int_ops) {
      for (const View& v : kViews) {
        INFO(dtype_name(dt) << " op " << int(op) << " view " << v.name);
        compare_unary(op, small_ints(v.base, dt, -50, 50, 3), v, {0.0, 0.0});
      }
    }
  }
  // Wrapping: negating the most negative value gives itself, as on the CPU.
  const Tensor lowest = from_vector<int32_t>({std::numeric_limits<int32_t>::min(), -3}, {2});
  compare_unary(UnaryOp::neg, lowest, kViews[0], {0.0, 0.0});
  for (const View& v : kViews) compare_unary(UnaryOp::logical_not, small_ints(v.base, DType::b8, 0, 1, 5), v, {0.0, 0.0});
}

TEST_CASE("cuda unary keeps NaN and infinities where the CPU does") {
  TS_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector<double>({nan, inf, -inf, 0.0, -0.0, 100.0, -100.0, 1e-30}, {8});
  for (int o = 0; o < int(UnaryOp::logical_not); ++o) {
    INFO("op " << o);
    compare_unary(UnaryOp(o), x, kViews[0], tol_for(DType::f32));
  }
}

TEST_CASE("cuda unary rejects what the CPU rejects") {
  TS_REQUIRE_GPU();
  const Tensor xi = gpu(small_ints({5}, DType::i32, -3, 3, 1));
  CHECK_THROWS_AS(kernels::unary(UnaryOp::exp, xi, empty({5}, {.dtype = DType::i32, .device = cuda_device()})),
                  ValueError);
  const Tensor xf = gpu(uniform({5}, DType::f32, -1, 1, 1));
  CHECK_THROWS_AS(kernels::unary(UnaryOp::neg, xf, empty({6}, {.device = cuda_device()})), ValueError);
  CHECK_THROWS_AS(kernels::unary(UnaryOp::neg, xf, empty({5}, {.dtype = DType::f16, .device = cuda_device()})),
                  ValueError);
}

TEST_CASE("cuda binary floating ops match the CPU, with broadcasting") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (int o = 0; o <= int(BinaryOp::tanh_backward); ++o) {
      const BinaryOp op = BinaryOp(o);
      INFO(dtype_name(dt) << " op " << o);
      const bool pos_a = op == BinaryOp::pow;
      const double lo_a = pos_a ? 0.1 : -4.0;
      // div: keep b away from zero.
      auto b_of = [&](const Shape& s, uint64_t seed) {
        return op == BinaryOp::div ? uniform(s, dt, 0.5, 3.0, seed) : uniform(s, dt, -3.0, 3.0, seed);
      };
      // Same shape, contiguous (vector path plus tail).
      compare_binary(op, uniform({2053}, dt, lo_a, 4.0, 1), b_of({2053}, 2), {2053}, tol_for(dt));
      // Broadcast: (5, 1, 7) with (3, 1) to (5, 3, 7).
      compare_binary(op, uniform({5, 1, 7}, dt, lo_a, 4.0, 3), b_of({3, 1}, 4), {5, 3, 7}, tol_for(dt));
      // A broadcast scalar operand.
      const Tensor b1 = b_of({1}, 6);
      compare_binary(op, uniform({9, 33}, dt, lo_a, 4.0, 5), b1, {9, 33}, tol_for(dt));
      // A genuinely strided GPU operand: the transpose of a GPU tensor.
      const Tensor base = uniform({33, 9}, dt, lo_a, 4.0, 7);
      const DType out_dt = op >= BinaryOp::eq && op <= BinaryOp::logical_or ? DType::b8 : dt;
      const Tensor ref = empty({9, 33}, {.dtype = out_dt});
      const Tensor out2 = empty({9, 33}, {.dtype = out_dt, .device = cuda_device()});
      kernels::binary(op, gpu(base).transpose(0, 1), gpu(b1).expand({9, 33}), out2);
      kernels::binary(op, base.transpose(0, 1), b1.expand({9, 33}), ref);
      require_close(out2, ref, tol_for(dt).rtol, tol_for(dt).atol);
    }
  }
}

TEST_CASE("cuda binary integer, comparison and logic ops match the CPU exactly") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8}) {
    for (int o = 0; o <= int(BinaryOp::logical_or); ++o) {
      const BinaryOp op = BinaryOp(o);
      const bool compare = op >= BinaryOp::eq;
      const bool numeric = op == BinaryOp::add || op == BinaryOp::sub || op == BinaryOp::mul ||
                           op == BinaryOp::maximum || op == BinaryOp::minimum;
      const bool integer = dt == DType::i32 || dt == DType::i64;
      if (!compare && !(numeric && integer)) continue;
      INFO(dtype_name(dt) << " op " << o);
      const int lo = dt == DType::b8 ? 0 : -3, hi = dt == DType::b8 ? 1 : 3;
      compare_binary(op, small_ints({1031}, dt, lo, hi, 8), small_ints({1031}, dt, lo, hi, 9), {1031}, {0.0, 0.0});
      compare_binary(op, small_ints({4, 1, 5}, dt, lo, hi, 10), small_ints({3, 1}, dt, lo, hi, 12), {4, 3, 5},
                     {0.0, 0.0});
    }
  }
  // Integer overflow wraps as on the CPU.
  const Tensor big = from_vector<int64_t>({std::numeric_limits<int64_t>::max(), 7}, {2});
  compare_binary(BinaryOp::add, big, big, {2}, {0.0, 0.0});
  compare_binary(BinaryOp::mul, big, big, {2}, {0.0, 0.0});
}

TEST_CASE("cuda maximum and minimum propagate NaN like the CPU") {
  TS_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = from_vector<double>({nan, 1.0, 2.0, nan}, {4});
  const Tensor b = from_vector<double>({1.0, nan, 3.0, nan}, {4});
  for (BinaryOp op : {BinaryOp::maximum, BinaryOp::minimum}) compare_binary(op, a, b, {4}, {0.0, 0.0});
}

TEST_CASE("cuda binary rejects what the CPU rejects") {
  TS_REQUIRE_GPU();
  const Tensor a = gpu(small_ints({4}, DType::i32, -3, 3, 1));
  const Tensor out = empty({4}, {.dtype = DType::i32, .device = cuda_device()});
  CHECK_THROWS_AS(kernels::binary(BinaryOp::div, a, a, out), ValueError);
  CHECK_THROWS_AS(kernels::binary(BinaryOp::add, a, gpu(small_ints({4}, DType::i64, 0, 1, 2)), out), ValueError);
  CHECK_THROWS_AS(kernels::binary(BinaryOp::add, a, a.to(kCPU), out), ValueError);  // mixed devices
}

TEST_CASE("cuda where matches the CPU for every dtype, with broadcasting") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8}) {
    INFO(dtype_name(dt));
    const Shape shape{6, 5, 7};
    const Tensor cond = small_ints({6, 1, 7}, DType::b8, 0, 1, 21);
    const Tensor a = small_ints({5, 7}, dt, 0, 1, 22);
    const Tensor b = small_ints({6, 5, 7}, dt, 0, 1, 23);
    const Tensor ref = empty(shape, {.dtype = dt});
    kernels::where(cond.expand(shape), a.expand(shape), b, ref);
    const Tensor out = empty(shape, {.dtype = dt, .device = cuda_device()});
    kernels::where(gpu(cond).expand(shape), gpu(a).expand(shape), gpu(b), out);
    require_close(out, ref, 0.0, 0.0);
    // Contiguous (vector path plus tail).
    const Tensor c2 = small_ints({1027}, DType::b8, 0, 1, 24), a2 = small_ints({1027}, dt, 0, 1, 25),
                 b2 = small_ints({1027}, dt, 0, 1, 26);
    const Tensor ref2 = empty({1027}, {.dtype = dt});
    kernels::where(c2, a2, b2, ref2);
    const Tensor out2 = empty({1027}, {.dtype = dt, .device = cuda_device()});
    kernels::where(gpu(c2), gpu(a2), gpu(b2), out2);
    require_close(out2, ref2, 0.0, 0.0);
  }
}

TEST_CASE("cuda clamp matches the CPU, missing bounds included") {
  TS_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double bounds[][2] = {{-1.5, 2.5}, {nan, 0.5}, {-0.5, nan}, {3.0, -3.0}, {nan, nan}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    const bool integer = dt == DType::i32 || dt == DType::i64;
    for (const auto& bd : bounds) {
      for (const View& v : kViews) {
        INFO(dtype_name(dt) << " lo " << bd[0] << " hi " << bd[1] << " view " << v.name);
        const Tensor base = integer ? small_ints(v.base, dt, -5, 5, 31) : uniform(v.base, dt, -5.0, 5.0, 31);
        const Tensor x = v.make(base);
        const Tensor ref = empty(x.shape(), {.dtype = dt});
        kernels::clamp(x, bd[0], bd[1], ref);
        const Tensor out = empty(x.shape(), {.dtype = dt, .device = cuda_device()});
        kernels::clamp(v.make(gpu(base)), bd[0], bd[1], out);
        require_close(out, ref, 0.0, 0.0);
      }
    }
  }
}
