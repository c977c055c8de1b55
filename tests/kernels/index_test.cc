// Tests for the CPU gather / scatter_add against naive N-d loops with torch semantics: every dim
// (negative included), index smaller than the other operands, strided operands, several dtypes,
// duplicate indices, thread-count independence, and index range errors naming value and bound.
#include "kernels/cpu/index.h"

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

Tensor random_index(const Shape& shape, int64_t bound, uint64_t seed) {
  Generator gen(seed);
  return randint(0, bound, shape, {.dtype = DType::i64}, &gen);
}

// Row-major offset of a multi-index in `shape`.
int64_t flat(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}

// Calls fn(multi_index) for every element of `shape`, row-major.
template <typename Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t n = shape_numel(shape); n > 0; --n) {
    fn(idx);
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<double> ref_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> vx = values(x), vi = values(index);
  std::vector<double> out;
  for_each_index(index.shape(), [&](std::vector<int64_t> idx) {
    const int64_t k = flat(idx, index.shape());
    idx[dim] = int64_t(vi[k]);
    out.push_back(vx[flat(idx, x.shape())]);
  });
  return out;
}

std::vector<double> ref_scatter_add(const Tensor& src, int64_t dim, const Tensor& index,
                                    const Tensor& out) {
  const std::vector<double> vs = values(src), vi = values(index);
  std::vector<double> result = values(out);
  for_each_index(index.shape(), [&](std::vector<int64_t> idx) {
    const double s = vs[flat(idx, src.shape())];
    idx[dim] = int64_t(vi[flat(idx, index.shape())]);
    result[flat(idx, out.shape())] += s;
  });
  return result;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    bad += !(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("gather matches torch semantics along every dim", "[index]") {
  const Shape xs = {3, 4, 5};
  Tensor x = randn_of(xs, 1);
  uint64_t seed = 10;
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    for (Shape is : {Shape{3, 4, 5}, Shape{2, 3, 4}, Shape{1, 1, 7}, Shape{3, 4, 1}}) {
      if (is[0] > xs[0] && d != 0) continue;
      bool fits = true;
      for (int64_t k = 0; k < 3; ++k) fits &= k == d || is[k] <= xs[k];
      if (!fits) continue;
      INFO("dim " << dim << " index " << shape_str(is));
      Tensor index = random_index(is, xs[d], seed++);
      Tensor out = empty(is);
      kc::gather(x, dim, index, out);
      CHECK(values(out) == ref_gather(x, d, index));
    }
  }
}

TEST_CASE("gather handles strided operands and every dtype", "[index]") {
  Tensor x = randn_of({6, 5}, 2).transpose(0, 1);  // (5, 6), strided
  Tensor index =
      random_index({7, 4}, 5, 3).transpose(0, 1);  // (4, 7), strided, for dim 0 of (5, 7)
  Tensor idx1 = random_index({4, 9}, 6, 4).slice(1, 0, 9, 2);  // (4, 5) with column stride 2
  Tensor out = empty({5, 4}).transpose(0, 1);                  // (4, 5), strided
  kc::gather(x, 1, idx1, out);
  CHECK(values(out) == ref_gather(x, 1, idx1));
  Tensor x0 = randn_of({5, 7}, 5), out0 = empty({4, 7});
  kc::gather(x0, 0, index, out0);
  CHECK(values(out0) == ref_gather(x0, 0, index));
  for (DType dt : {DType::bf16, DType::f16, DType::i64, DType::i32, DType::b8}) {
    INFO(dtype_name(dt));
    Tensor xd = randn_of({4, 6}, 6).to(dt);
    Tensor id = random_index({4, 3}, 6, 7);
    Tensor od = empty({4, 3}, {.dtype = dt});
    kc::gather(xd, 1, id, od);
    CHECK(values(od) == ref_gather(xd, 1, id));
  }
}

TEST_CASE("scatter_add accumulates duplicates like a serial loop", "[index]") {
  uint64_t seed = 20;
  for (int64_t dim : {0, 1, 2, -1}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    const Shape os = {4, 5, 6};
    Shape is = {3, 4, 5};
    is[d] = 9;  // more sources than slots along dim: duplicates are certain
    INFO("dim " << dim);
    Tensor src = randn_of({9, 9, 9}, seed++);  // at least index's size in every dim
    Tensor index = random_index(is, os[d], seed++);
    Tensor out = randn_of(os, seed++);
    const std::vector<double> want = ref_scatter_add(src, d, index, out);
    kc::scatter_add(src, dim, index, out);
    expect_close(values(out), want, 1e-6);
  }
}

TEST_CASE("scatter_add on strided outputs and integer and 16-bit dtypes", "[index]") {
  Tensor out = zeros({6, 4}).transpose(0, 1);  // (4, 6), strided
  Tensor src = randn_of({4, 10}, 30);
  Tensor index = random_index({4, 10}, 6, 31);
  std::vector<double> want = ref_scatter_add(src, 1, index, out);
  kc::scatter_add(src, 1, index, out);
  expect_close(values(out), want, 1e-6);
  for (DType dt : {DType::i32, DType::i64, DType::bf16}) {
    INFO(dtype_name(dt));
    Tensor o = zeros({3, 5}, {.dtype = dt});
    Tensor s = full({3, 8}, 2.0, {.dtype = dt});
    Tensor i = random_index({3, 8}, 5, 32);
    want = ref_scatter_add(s, 1, i, o);
    kc::scatter_add(s, 1, i, o);
    CHECK(values(o) == want);
  }
  CHECK_THROWS_AS(kc::scatter_add(zeros({2}, {.dtype = DType::b8}), 0, random_index({2}, 2, 1),
                                  zeros({2}, {.dtype = DType::b8})),
                  ValueError);
}

TEST_CASE("scatter_add is identical for every thread count", "[index]") {
  Tensor src = randn_of({512, 300}, 40);
  Tensor index = random_index({512, 300}, 7, 41);
  const int saved = num_threads();
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    Tensor out = zeros({512, 7});
    kc::scatter_add(src, 1, index, out);
    results.push_back(values(out));
  }
  set_num_threads(saved);
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

TEST_CASE("gather and scatter_add reject bad indices with value and bound", "[index]") {
  Tensor x = randn_of({3, 5}, 50);
  Tensor bad = from_vector(std::vector<int64_t>{0, 5, 1}, {3, 1}, {.dtype = DType::i64});
  CHECK_THROWS_WITH(kc::gather(x, 1, bad, empty({3, 1})),
                    Catch::Contains("got 5") && Catch::Contains("[0, 5)"));
  Tensor neg = from_vector(std::vector<int64_t>{0, -1, 1}, {3, 1}, {.dtype = DType::i64});
  CHECK_THROWS_WITH(kc::scatter_add(randn_of({3, 1}, 51), 1, neg, zeros({3, 5})),
                    Catch::Contains("got -1"));
  CHECK_THROWS_AS(kc::gather(x, 2, bad, empty({3, 1})), ValueError);  // dim out of range
  CHECK_THROWS_AS(kc::gather(x, 1, bad.to(DType::i32), empty({3, 1})), ValueError);  // index dtype
  CHECK_THROWS_AS(kc::gather(x, 1, random_index({4, 1}, 5, 1), empty({4, 1})),
                  ValueError);  // too many rows
  CHECK_THROWS_AS(kc::gather(x, 1, random_index({3, 1}, 5, 1), empty({3, 2})),
                  ValueError);  // out shape
}
