// CUDA reductions against the CPU: every op over inner, outer, middle and several dims, on shapes
// that take each kernel path (warp rows, block rows split across blocks, columns split across
// blocks), transposed inputs and strided outputs, integer and bool sums, argmax/argmin tie and NaN
// rules (exact), and empty reductions.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "core/factory.h"
#include "kernels/kernels.h"
#include "tests/testing/compare.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using kernels::ReduceOp;
using testing::require_close;

namespace {

Tensor gpu(const Tensor& t) { return t.to(cuda_device()); }

Tensor uniform(const Shape& shape, DType dt, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  Tensor t = empty(shape);
  uniform_(t, lo, hi, &gen);
  return t.to(dt);
}

Shape keep_shape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape out = s;
  for (int64_t d : dims) out[size_t(d)] = 1;
  return out;
}

DType out_dtype(ReduceOp op, DType in) {
  if (op == ReduceOp::argmax || op == ReduceOp::argmin) return DType::i64;
  if (op == ReduceOp::sum && (in == DType::b8)) return DType::i64;
  return in;
}

// Runs op on x (CPU) and on the same view of x's data on the GPU; `view` makes the view.
template <typename View>
void compare(ReduceOp op, const Tensor& base, View view, const std::vector<int64_t>& dims, double param,
             double rtol, double atol, DType out_dt) {
  const Tensor x = view(base);
  const Shape os = keep_shape(x.shape(), dims);
  const Tensor ref = empty(os, {.dtype = out_dt});
  kernels::reduce(op, x, dims, ref, param);
  const Tensor out = empty(os, {.dtype = out_dt, .device = cuda_device()});
  kernels::reduce(op, view(gpu(base)), dims, out, param);
  require_close(out, ref, rtol, atol);
}

void compare(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, double param, double rtol,
             double atol) {
  compare(op, x, [](const Tensor& t) { return t; }, dims, param, rtol, atol, out_dtype(op, x.dtype()));
}

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
};

// Shapes for each path: short rows (warp), long rows with few outputs (block rows, split), outer
// dims (columns, split when outputs are few), middle and multiple dims, a full reduction.
const Case kCases[] = {
    {{3, 5, 7}, {2}},        {{3, 5, 7}, {0}},         {{3, 5, 7}, {1}},      {{3, 5, 7}, {0, 2}},
    {{3, 5, 7}, {0, 1, 2}},  {{4, 100003}, {1}},       {{70001, 3}, {0}},     {{257, 129}, {0}},
    {{9, 2049}, {1}},        {{2, 3, 40000}, {0, 2}},  {{1, 1}, {1}},         {{6, 1, 5}, {1}},
};

struct Tol {
  double rtol, atol;
};

// Both sides accumulate in f32 in different orders; 16-bit results may round one ulp apart.
Tol tol_for(ReduceOp op, DType dt) {
  const double f32_rtol = op == ReduceOp::var ? 1e-4 : 2e-5;
  switch (dt) {
    case DType::f16: return {2e-3, 1e-3};
    case DType::bf16: return {1.6e-2, 1e-2};
    default: return {f32_rtol, 1e-5};
  }
}

}  // namespace

TEST_CASE("cuda floating reductions match the CPU on every path") {
  TS_REQUIRE_GPU();
  struct OpParam {
    ReduceOp op;
    double param;
  };
  const OpParam ops[] = {{ReduceOp::sum, 0},  {ReduceOp::mean, 0}, {ReduceOp::max, 0},  {ReduceOp::min, 0},
                         {ReduceOp::var, 1},  {ReduceOp::var, 0},  {ReduceOp::norm, 1}, {ReduceOp::norm, 2},
                         {ReduceOp::norm, 3}, {ReduceOp::norm, INFINITY}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (const Case& c : kCases) {
      // Positive values keep long sums free of cancellation, so a relative tolerance is fair.
      const Tensor x = uniform(c.shape, dt, 0.25, 1.75, 17);
      for (const OpParam& o : ops) {
        INFO(dtype_name(dt) << " op " << int(o.op) << " p " << o.param << " shape " << shape_str(c.shape)
                            << " dims " << c.dims.size() << " first " << c.dims[0]);
        const Tol tol = tol_for(o.op, dt);
        compare(o.op, x, c.dims, o.param, tol.rtol, tol.atol);
      }
    }
  }
}

TEST_CASE("cuda reductions of mixed-sign values, transposed inputs and strided outputs") {
  TS_REQUIRE_GPU();
  const Tensor base = uniform({300, 41}, DType::f32, -2.0, 2.0, 5);
  auto transposed = [](const Tensor& t) { return t.transpose(0, 1); };  // (41, 300), strides (1, 41)
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::argmax, ReduceOp::argmin,
                      ReduceOp::var, ReduceOp::norm}) {
    for (int64_t d : {0, 1}) {
      INFO("op " << int(op) << " dim " << d);
      const double param = op == ReduceOp::var || op == ReduceOp::norm ? 2.0 : 0.0;
      // Sums of mixed signs cancel: an absolute tolerance on the scale of the terms.
      compare(op, base, transposed, {d}, param, 1e-5, 1e-4, out_dtype(op, DType::f32));
    }
  }
  // A strided output: every other element of a larger GPU buffer.
  const Tensor x = uniform({64, 33}, DType::f32, -1.0, 1.0, 9);
  const Tensor ref = empty({64, 1});
  kernels::reduce(ReduceOp::sum, x, {1}, ref);
  const Tensor buf = zeros({64, 2}, {.device = cuda_device()});
  const Tensor out = buf.narrow(1, 1, 1);  // (64, 1) with stride 2
  kernels::reduce(ReduceOp::sum, gpu(x), {1}, out);
  require_close(out, ref, 1e-5, 1e-5);
  require_close(buf.narrow(1, 0, 1), zeros({64, 1}), 0.0, 0.0);  // untouched
}

TEST_CASE("cuda argmax and argmin follow the CPU's tie and NaN rules exactly") {
  TS_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Ties: the first index wins. NaN: the first NaN's index wins.
  const Tensor ties = from_vector<double>({1, 3, 3, 0, 3, -1, -1, 2, nan, 5, nan, -9}, {2, 6});
  for (ReduceOp op : {ReduceOp::argmax, ReduceOp::argmin}) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      compare(op, ties.to(dt), {1}, 0, 0.0, 0.0);
      compare(op, ties.to(dt), {0}, 0, 0.0, 0.0);
    }
    // Long rows of many ties (lanes and splits must still pick the first), with and without NaN.
    Generator gen(3);
    const Tensor many = randint(0, 4, {5, 50001}, {.dtype = DType::i64}, &gen);
    compare(op, many, {1}, 0, 0.0, 0.0);
    compare(op, many.to(DType::i32), {1}, 0, 0.0, 0.0);
    compare(op, many.to(DType::f32), {1}, 0, 0.0, 0.0);
    compare(op, many.to(DType::f32).transpose(0, 1).contiguous(), {0}, 0, 0.0, 0.0);  // columns
    Tensor with_nan = many.to(DType::f32);
    with_nan.select(0, 2).narrow(0, 40000, 1).fill_(nan);
    with_nan.select(0, 2).narrow(0, 45000, 1).fill_(nan);
    compare(op, with_nan, {1}, 0, 0.0, 0.0);
  }
}

TEST_CASE("cuda integer and bool reductions match the CPU exactly") {
  TS_REQUIRE_GPU();
  Generator gen(7);
  const Tensor x64 = randint(-1000, 1000, {37, 1001}, {.dtype = DType::i64}, &gen);
  for (DType dt : {DType::i32, DType::i64}) {
    const Tensor x = x64.to(dt);
    for (int64_t d : {0, 1}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
        INFO(dtype_name(dt) << " op " << int(op) << " dim " << d);
        compare(op, x, {d}, 0, 0.0, 0.0);
      }
      // An integer sum into i64.
      compare(ReduceOp::sum, x, [](const Tensor& t) { return t; }, {d}, 0, 0.0, 0.0, DType::i64);
    }
    compare(ReduceOp::sum, x, {0, 1}, 0, 0.0, 0.0);
  }
  const Tensor flags = randint(0, 2, {129, 77}, {.dtype = DType::i64}, &gen).to(DType::b8);
  compare(ReduceOp::sum, flags, {0}, 0, 0.0, 0.0);
  compare(ReduceOp::sum, flags, {1}, 0, 0.0, 0.0);
  // Floating-only ops on integers throw, as on the CPU.
  CHECK_THROWS_AS(kernels::reduce(ReduceOp::mean, gpu(x64), {0}, empty({1, 1001}, {.dtype = DType::i64, .device = cuda_device()})),
                  ValueError);
}

TEST_CASE("cuda empty reductions give the CPU's values") {
  TS_REQUIRE_GPU();
  const Tensor x = empty({4, 0});
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::var, ReduceOp::norm}) {
    INFO("op " << int(op));
    compare(op, x, {1}, op == ReduceOp::norm ? 2.0 : 0.0, 0.0, 0.0);
  }
  CHECK_THROWS_AS(kernels::reduce(ReduceOp::max, gpu(x), {1}, empty({4, 1}, {.device = cuda_device()})),
                  ValueError);
  // No outputs at all: nothing to do.
  compare(ReduceOp::sum, empty({0, 5}), {1}, 0, 0.0, 0.0);
}
