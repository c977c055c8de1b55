// softmax, log_softmax, layer_norm, dropout and embedding: values against compositions of the
// element-wise ops or hand loops, finite-difference gradients (including non-contiguous inputs),
// dropout's counter-based mask, and error messages.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tests/testing/compare.h"
#include "tests/testing/gradcheck.h"

using namespace tessera;
using tessera::testing::gradcheck;
using tessera::testing::require_close;
using tessera::testing::to_doubles;

namespace {

Tensor rnd(const Shape& shape, uint64_t seed, bool requires_grad = false) {
  Generator gen(seed);
  return randn(shape, {.requires_grad = requires_grad}, &gen);
}

Tensor leaf(Tensor t) {
  t.set_requires_grad(true);
  return t;
}

// softmax by composition: exp(x - max) / sum(exp(x - max)).
Tensor softmax_ref(const Tensor& x, int64_t dim) {
  Tensor e = exp(sub(x, amax(x, {dim}, true)));
  return div(e, sum(e, {dim}, true));
}

}  // namespace

TEST_CASE("softmax and log_softmax match the composition over every dim", "[autograd][softmax]") {
  Tensor x = rnd({2, 3, 4}, 1);
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim " << dim);
    Tensor y = softmax(x, dim);
    REQUIRE(y.shape() == x.shape());
    require_close(y, softmax_ref(x, dim), 1e-5, 1e-6);
    require_close(log_softmax(x, dim), log(softmax_ref(x, dim)), 1e-5, 1e-5);
    require_close(sum(y, {dim}), ones({dim == 0 ? 3 : 2, dim == 2 || dim == -1 ? 3 : 4}), 1e-5, 1e-5);
  }
  // Large logits do not overflow.
  Tensor big = from_vector(std::vector<float>{1000.f, 1001.f, 1002.f}, {3});
  require_close(softmax(big), softmax(from_vector(std::vector<float>{0.f, 1.f, 2.f}, {3})), 1e-5, 1e-6);
  REQUIRE_THROWS_WITH(softmax(x, 3), Catch::Contains("[softmax]"));
  REQUIRE_THROWS_WITH(softmax(ones({3}, {.dtype = DType::i64})), Catch::Contains("expected a floating"));
}

TEST_CASE("softmax, log_softmax and layer_norm in f16 and bf16 are close to f32", "[autograd][softmax]") {
  Tensor x = rnd({3, 16}, 6), w = rnd({16}, 7), b = rnd({16}, 8);
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor y = softmax(x.to(dt), 1);
    REQUIRE(y.dtype() == dt);
    require_close(y, softmax(x, 1), 2e-2, 2e-3);
    require_close(log_softmax(x.to(dt), 0), log_softmax(x, 0), 2e-2, 2e-2);
    require_close(layer_norm(x.to(dt), w.to(dt), b.to(dt)), layer_norm(x, w, b), 2e-2, 5e-2);
  }
}

TEST_CASE("softmax and log_softmax gradients", "[autograd][softmax][gradcheck]") {
  for (int64_t dim : {0, 1, -1}) {
    INFO("dim " << dim);
    auto sm = [dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); };
    auto lsm = [dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); };
    CHECK(gradcheck(sm, {rnd({3, 4, 5}, 2, true)}));
    CHECK(gradcheck(lsm, {rnd({3, 4, 5}, 3, true)}));
    CHECK(gradcheck(sm, {leaf(rnd({5, 4}, 4).transpose(0, 1))}));
    CHECK(gradcheck(lsm, {leaf(rnd({4, 10}, 5).slice(1, 0, 10, 2))}));
  }
}

TEST_CASE("layer_norm matches a hand loop", "[autograd][layer_norm]") {
  const int64_t rows = 6, c = 5;
  Tensor x = rnd({2, 3, c}, 10), w = rnd({c}, 11), b = rnd({c}, 12);
  Tensor y = layer_norm(x, w, b, 1e-5);
  std::vector<double> xv = to_doubles(x), wv = to_doubles(w), bv = to_doubles(b), ref(size_t(rows * c));
  std::vector<double> ref_plain(ref.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) mean += xv[size_t(r * c + j)] / double(c);
    for (int64_t j = 0; j < c; ++j) var += std::pow(xv[size_t(r * c + j)] - mean, 2) / double(c);
    for (int64_t j = 0; j < c; ++j) {
      double n = (xv[size_t(r * c + j)] - mean) / std::sqrt(var + 1e-5);
      ref_plain[size_t(r * c + j)] = n;
      ref[size_t(r * c + j)] = n * wv[size_t(j)] + bv[size_t(j)];
    }
  }
  require_close(y, from_vector(std::vector<float>(ref.begin(), ref.end()), {2, 3, c}), 1e-4, 1e-5);
  Tensor plain = layer_norm(x, Tensor(), Tensor(), 1e-5);
  require_close(plain, from_vector(std::vector<float>(ref_plain.begin(), ref_plain.end()), {2, 3, c}), 1e-4, 1e-5);
  require_close(layer_norm(x.transpose(0, 1), w, b), layer_norm(x.transpose(0, 1).contiguous(), w, b), 1e-6,
                1e-6);
  REQUIRE_THROWS_WITH(layer_norm(x, rnd({4}, 1), b), Catch::Contains("[layer_norm] expected weight and bias of shape (5)"));
}

TEST_CASE("layer_norm gradients", "[autograd][layer_norm][gradcheck]") {
  auto ln = [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); };
  auto ln_plain = [](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-5); };
  CHECK(gradcheck(ln, {rnd({2, 3, 5}, 20, true), rnd({5}, 21, true), rnd({5}, 22, true)}));
  CHECK(gradcheck(ln, {rnd({4, 6}, 23), rnd({6}, 24, true), Tensor()}));  // weight only
  CHECK(gradcheck(ln_plain, {leaf(rnd({5, 4}, 25).transpose(0, 1))}));
}

TEST_CASE("dropout: the generator's counters decide the mask", "[autograd][dropout]") {
  Tensor x = ones({4000});
  Generator g1(7), g2(7);
  Tensor a = dropout(x, 0.3, true, &g1);
  Tensor b = dropout(x, 0.3, true, &g2);
  require_close(a, b, 0.0, 0.0);  // same (seed, offset): same mask
  CHECK(g1.offset() == 4000);     // each call reserves one counter per element
  Tensor c = dropout(x, 0.3, true, &g1);  // the next counters: a different mask
  CHECK(to_doubles(c) != to_doubles(a));

  // Kept values are scaled by 1 / (1 - p), dropped ones are 0, and about 1 - p are kept.
  std::vector<double> v = to_doubles(a);
  int64_t kept = 0;
  double total = 0.0;
  for (double e : v) {
    if (e != 0.0) {
      ++kept;
      REQUIRE(e == Approx(1.0 / 0.7));
    }
    total += e;
  }
  CHECK(double(kept) / 4000.0 == Approx(0.7).margin(0.03));
  CHECK(total / 4000.0 == Approx(1.0).margin(0.05));
}

TEST_CASE("dropout uses the default generator and is the identity when off", "[autograd][dropout]") {
  Tensor x = rnd({3, 5}, 30);
  manual_seed(99);
  Tensor a = dropout(x, 0.5);
  manual_seed(99);
  Tensor b = dropout(x, 0.5);
  require_close(a, b, 0.0, 0.0);
  CHECK(dropout(x, 0.5, false).is_same(x));
  CHECK(dropout(x, 0.0).is_same(x));
  REQUIRE_THROWS_WITH(dropout(x, 1.0), Catch::Contains("[dropout] expected p in [0, 1), got 1"));
  REQUIRE_THROWS_WITH(dropout(x, -0.1), Catch::Contains("[dropout] expected p in [0, 1)"));
}

TEST_CASE("dropout backward applies the forward's mask", "[autograd][dropout]") {
  Tensor x = rnd({8, 50}, 31, true);
  Generator g(5);
  Tensor y = dropout(x, 0.4, true, &g);
  Tensor gy = rnd({8, 50}, 32);
  autograd::backward({y}, {gy});
  // y = x * m / (1 - p) elementwise, so grad_x = gy * m / (1 - p) = gy * y / x.
  std::vector<double> yv = to_doubles(y), xv = to_doubles(x.detach()), gv = to_doubles(gy), gx = to_doubles(x.grad());
  for (size_t i = 0; i < yv.size(); ++i) {
    const double expected = yv[i] == 0.0 ? 0.0 : gv[i] / 0.6;
    REQUIRE(gx[i] == Approx(expected).margin(1e-5));
    if (yv[i] != 0.0) REQUIRE(yv[i] == Approx(xv[i] / 0.6).margin(1e-5));
  }
  // A non-contiguous gradient reads the mask by logical index too.
  Tensor xt = leaf(rnd({6, 5}, 33).transpose(0, 1));
  auto drop = [](const std::vector<Tensor>& in) {
    Generator gen(11);
    return dropout(in[0], 0.5, true, &gen);
  };
  CHECK(gradcheck(drop, {xt}));
  CHECK(gradcheck(drop, {rnd({3, 7}, 34, true)}));
}

TEST_CASE("embedding looks up rows and scatters gradients back", "[autograd][embedding]") {
  Tensor w = rnd({5, 3}, 40, true);
  Tensor ids = from_vector(std::vector<int64_t>{1, 3, 1, 0}, {2, 2}, {.dtype = DType::i64});
  Tensor out = embedding(w, ids);
  REQUIRE(out.shape() == Shape{2, 2, 3});
  require_close(out.select(0, 1).select(0, 0), w.detach().select(0, 1), 0.0, 0.0);
  require_close(out.select(0, 0).select(0, 1), w.detach().select(0, 3), 0.0, 0.0);
  Tensor ids32 = from_vector(std::vector<int32_t>{4, 2}, {2}, {.dtype = DType::i32});
  require_close(embedding(w, ids32).select(0, 0), w.detach().select(0, 4), 0.0, 0.0);

  autograd::backward({sum(out)});
  // Row 1 is used twice, rows 0 and 3 once, rows 2 and 4 never.
  std::vector<double> g = to_doubles(w.grad());
  const double counts[5] = {1, 2, 0, 1, 0};
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t j = 0; j < 3; ++j) REQUIRE(g[size_t(r * 3 + j)] == counts[r]);

  auto emb = [ids](const std::vector<Tensor>& in) { return embedding(in[0], ids); };
  CHECK(gradcheck(emb, {rnd({5, 3}, 41, true)}));
  CHECK(gradcheck(emb, {leaf(rnd({3, 5}, 42).transpose(0, 1))}));
}

TEST_CASE("a tied embedding's gradient adds into the head's: the sum of both, checked numerically",
          "[autograd][embedding]") {
  // wte used twice, as GPT ties it: looked up, then as the head's weight. The engine hands the
  // head's (V, C) gradient to the embedding's backward, which scatters its rows into it
  // (Node::apply_into); the result must be the sum of both paths.
  Tensor ids = from_vector(std::vector<int64_t>{1, 3, 1, 0}, {4}, {.dtype = DType::i64});
  auto tied = [ids](const std::vector<Tensor>& in) {
    const Tensor h = tanh(embedding(in[0], ids));  // (4, C)
    return linear(h, in[0], Tensor());             // (4, V): the head after the lookup
  };
  Tensor w = rnd({5, 3}, 43, true);
  autograd::backward({sum(tied({w}))});
  // The two paths separately, on copies: the same total.
  Tensor a = rnd({5, 3}, 43, true), b = rnd({5, 3}, 43, true);
  autograd::backward({sum(linear(tanh(embedding(a, ids)), b.detach(), Tensor()))});
  autograd::backward({sum(linear(tanh(embedding(a.detach(), ids)), b, Tensor()))});
  require_close(w.grad(), add(a.grad(), b.grad()), 1e-6, 1e-6);
  CHECK(gradcheck(tied, {rnd({5, 3}, 44, true)}));
}

TEST_CASE("embedding rejects ids out of range, naming the id and V", "[autograd][embedding]") {
  Tensor w = rnd({5, 3}, 43);
  REQUIRE_THROWS_WITH(embedding(w, from_vector(std::vector<int64_t>{0, 7}, {2}, {.dtype = DType::i64})),
                      Catch::Contains("got id 7") && Catch::Contains("V = 5"));
  REQUIRE_THROWS_WITH(embedding(w, from_vector(std::vector<int32_t>{-1}, {1}, {.dtype = DType::i32})), Catch::Contains("got id -1"));
  REQUIRE_THROWS_WITH(embedding(w, ones({2})), Catch::Contains("expected ids of dtype i32 or i64"));
}
