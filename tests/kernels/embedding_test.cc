// Tests for the CPU embedding: the forward gathers rows for i32 / i64 ids of any shape from any
// layout; the backward accumulates into grad_weight exactly like a serial loop (repeats included),
// identically for any thread count, and rejects out-of-range ids.
#include "kernels/cpu/embedding.h"

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

Tensor ids_of(const std::vector<int64_t>& v, const Shape& shape) {
  return from_vector(v, shape, {.dtype = DType::i64});
}

std::vector<int64_t> id_values(const Tensor& ids) {
  Tensor c = ids.to(DType::i64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

void check_forward(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  kc::embedding(weight, ids, out);
  const int64_t C = weight.size(1);
  const std::vector<double> w = values(weight), o = values(out);
  const std::vector<int64_t> id = id_values(ids);
  int64_t bad = 0;
  for (size_t i = 0; i < id.size(); ++i) {
    for (int64_t c = 0; c < C; ++c) bad += o[i * C + c] != w[id[i] * C + c];
  }
  CHECK(bad == 0);
}

// grad_weight after `before` += rows of grad_out, summed in double in position order.
std::vector<double> ref_backward(const std::vector<double>& before, const Tensor& grad_out,
                                 const Tensor& ids, int64_t C) {
  std::vector<double> out = before;
  const std::vector<double> g = values(grad_out);
  const std::vector<int64_t> id = id_values(ids);
  for (size_t i = 0; i < id.size(); ++i) {
    for (int64_t c = 0; c < C; ++c) out[id[i] * C + c] += g[i * C + c];
  }
  return out;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    bad += !(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("embedding gathers rows for i32 and i64 ids of any shape", "[embedding]") {
  Tensor weight = randn_of({11, 5}, 1);
  for (DType idt : {DType::i64, DType::i32}) {
    INFO(dtype_name(idt));
    Tensor ids = from_vector(std::vector<int64_t>{0, 10, 3, 3, 7, 0}, {2, 3}, {.dtype = idt});
    Tensor out = empty({2, 3, 5});
    check_forward(weight, ids, out);
    Tensor one = from_vector(std::vector<int64_t>{4}, {1}, {.dtype = idt});
    check_forward(weight, one, empty({1, 5}));
  }
  // GPT-2 sized table, many ids spread over threads.
  Tensor big = randn_of({50257, 64}, 2);
  Generator gen(3);
  Tensor ids = randint(0, 50257, {4, 256}, {.dtype = DType::i64}, &gen);
  check_forward(big, ids, empty({4, 256, 64}));
}

TEST_CASE("embedding reads strided tables and ids and writes strided outputs", "[embedding]") {
  Tensor weight = randn_of({6, 9}, 4).transpose(0, 1);  // (9, 6) with column stride 9
  Tensor ids =
      ids_of(std::vector<int64_t>{8, 1, 2, 8, 0, 5, 1, 1}, {2, 4}).transpose(0, 1);  // (4, 2)
  Tensor out = empty({6, 4, 2}).permute({1, 2, 0});  // (4, 2, 6), strided
  check_forward(weight, ids, out);
  Tensor wh = randn_of({7, 3}, 5, DType::bf16);
  check_forward(wh, ids_of(std::vector<int64_t>{6, 0, 6}, {3}),
                empty({3, 3}, {.dtype = DType::bf16}));
}

TEST_CASE("embedding rejects ids out of range and mismatched outputs", "[embedding]") {
  Tensor weight = randn_of({4, 3}, 6);
  Tensor bad = ids_of(std::vector<int64_t>{1, 4}, {2});
  CHECK_THROWS_WITH(kc::embedding(weight, bad, empty({2, 3})), Catch::Contains("got 4"));
  CHECK_THROWS_AS(kc::embedding(weight, ids_of(std::vector<int64_t>{-1}, {1}), empty({1, 3})),
                  ValueError);
  CHECK_THROWS_AS(kc::embedding(weight, ids_of(std::vector<int64_t>{1}, {1}), empty({1, 4})),
                  ValueError);
  CHECK_THROWS_AS(kc::embedding_backward(empty({2, 3}), bad, zeros({4, 3})), ValueError);
}

TEST_CASE("embedding_backward accumulates repeated ids like a serial loop", "[embedding]") {
  const int64_t V = 13, C = 7;
  Tensor ids = ids_of(std::vector<int64_t>{3, 0, 3, 12, 3, 5, 0, 7, 3, 3, 12, 1}, {3, 4});
  Tensor grad_out = randn_of({3, 4, C}, 7);
  Tensor gw = randn_of({V, C}, 8);  // accumulated into, not overwritten
  const std::vector<double> want = ref_backward(values(gw), grad_out, ids, C);
  kc::embedding_backward(grad_out, ids, gw);
  expect_close(values(gw), want, 1e-6);

  // Many positions on one id, and a strided grad_weight.
  Tensor same = full({1000}, 2.0, {.dtype = DType::i64});
  Tensor g2 = randn_of({1000, C}, 9);
  Tensor gw2 = zeros({C, V}).transpose(0, 1);
  const std::vector<double> want2 = ref_backward(values(gw2), g2, same, C);
  kc::embedding_backward(g2, same, gw2);
  expect_close(values(gw2), want2, 1e-5);
}

TEST_CASE("embedding_backward handles 16-bit gradients and tables", "[embedding]") {
  const int64_t V = 9, C = 16;
  Generator gen(10);
  Tensor ids = randint(0, V, {50}, {.dtype = DType::i32}, &gen);
  Tensor g = randn_of({50, C}, 11, DType::bf16);
  Tensor gw = zeros({V, C});
  kc::embedding_backward(g, ids, gw);
  expect_close(values(gw), ref_backward(std::vector<double>(V * C, 0.0), g, ids, C), 1e-5);
  Tensor gwh = zeros({V, C}, {.dtype = DType::bf16});
  kc::embedding_backward(g, ids, gwh);
  expect_close(values(gwh), values(gw), 1e-2);
}

TEST_CASE("embedding_backward is identical for every thread count", "[embedding]") {
  const int64_t V = 50257, C = 32;
  Generator gen(12);
  Tensor ids = randint(0, 300, {4, 512}, {.dtype = DType::i64}, &gen);  // many repeats
  Tensor g = randn_of({4, 512, C}, 13);
  const int saved = num_threads();
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 5}) {
    set_num_threads(threads);
    Tensor gw = zeros({V, C});
    kc::embedding_backward(g, ids, gw);
    results.push_back(values(gw.slice(0, 0, 300)));
  }
  set_num_threads(saved);
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}
