// scaled_dot_product_attention: values against a hand loop (causal, key padding, scale), dropout
// counters, finite-difference gradients (including non-contiguous q, k, v) and shape validation.
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

// softmax(scale * q k^T with masked keys at -inf) v, per (b, h, t) row in double; rows that see no
// key give zeros.
Tensor ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                     double scale) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), S = k.size(2), D = q.size(3);
  std::vector<double> qv = to_doubles(q), kv = to_doubles(k), vv = to_doubles(v);
  std::vector<double> mv = mask.defined() ? to_doubles(mask) : std::vector<double>(size_t(B * S), 1.0);
  std::vector<float> out(size_t(B * H * T * D), 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(size_t(S), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          if (mv[size_t(b * S + j)] == 0.0 || (causal && j > t + S - T)) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d)
            dot += qv[size_t(((b * H + h) * T + t) * D + d)] * kv[size_t(((b * H + h) * S + j) * D + d)];
          s[size_t(j)] = scale * dot;
          mx = std::max(mx, s[size_t(j)]);
        }
        if (mx == -INFINITY) continue;
        double z = 0.0;
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < S; ++j) acc += s[size_t(j)] / z * vv[size_t(((b * H + h) * S + j) * D + d)];
          out[size_t(((b * H + h) * T + t) * D + d)] = float(acc);
        }
      }
  return from_vector(out, q.shape());
}

Tensor padding_mask(const std::vector<int32_t>& keep, const Shape& shape) {
  return from_vector(keep, shape, {.dtype = DType::b8});
}

}  // namespace

TEST_CASE("attention matches a hand loop: plain, causal, padded, explicit scale", "[autograd][attention]") {
  Tensor q = rnd({2, 2, 3, 4}, 1), k = rnd({2, 2, 5, 4}, 2), v = rnd({2, 2, 5, 4}, 3);
  Tensor mask = padding_mask({1, 1, 0, 1, 0, 1, 1, 1, 1, 0}, {2, 5});
  const double def_scale = 1.0 / std::sqrt(4.0);
  require_close(scaled_dot_product_attention(q, k, v), ref_attention(q, k, v, Tensor(), false, def_scale), 1e-4,
                1e-5);
  require_close(scaled_dot_product_attention(q, k, v, {.causal = true}),
                ref_attention(q, k, v, Tensor(), true, def_scale), 1e-4, 1e-5);
  require_close(scaled_dot_product_attention(q, k, v, {.key_padding_mask = mask, .causal = true}),
                ref_attention(q, k, v, mask, true, def_scale), 1e-4, 1e-5);
  require_close(scaled_dot_product_attention(q, k, v, {.scale = 0.3}), ref_attention(q, k, v, Tensor(), false, 0.3),
                1e-4, 1e-5);
  // The default scale is 1/sqrt(D).
  require_close(scaled_dot_product_attention(q, k, v),
                scaled_dot_product_attention(q, k, v, {.scale = def_scale}), 1e-6, 1e-7);
}

TEST_CASE("attention on non-contiguous q, k, v (heads split from (B, T, H, D))", "[autograd][attention]") {
  Tensor q = rnd({1, 4, 2, 3}, 4).transpose(1, 2), k = rnd({1, 6, 2, 3}, 5).transpose(1, 2);
  Tensor v = rnd({1, 6, 2, 3}, 6).transpose(1, 2);
  require_close(scaled_dot_product_attention(q, k, v, {.causal = true}),
                ref_attention(q, k, v, Tensor(), true, 1.0 / std::sqrt(3.0)), 1e-4, 1e-5);
}

TEST_CASE("attention gradients", "[autograd][attention][gradcheck]") {
  Tensor mask = padding_mask({1, 0, 1, 1}, {1, 4});
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    auto attn = [causal](const std::vector<Tensor>& in) {
      return scaled_dot_product_attention(in[0], in[1], in[2], {.causal = causal});
    };
    CHECK(gradcheck(attn, {rnd({1, 2, 3, 4}, 10, true), rnd({1, 2, 4, 4}, 11, true), rnd({1, 2, 4, 4}, 12, true)}));
    auto masked = [causal, mask](const std::vector<Tensor>& in) {
      return scaled_dot_product_attention(in[0], in[1], in[2], {.key_padding_mask = mask, .causal = causal});
    };
    CHECK(gradcheck(masked, {rnd({1, 1, 4, 3}, 13, true), rnd({1, 1, 4, 3}, 14, true), rnd({1, 1, 4, 3}, 15, true)}));
  }
  auto attn = [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); };
  CHECK(gradcheck(attn, {leaf(rnd({2, 3, 2, 4}, 16).transpose(1, 2)), leaf(rnd({2, 5, 2, 4}, 17).transpose(1, 2)),
                         leaf(rnd({2, 2, 5, 8}, 18).slice(3, 0, 8, 2))}));
  // Only k needs a gradient.
  CHECK(gradcheck(attn, {rnd({1, 1, 2, 3}, 19), rnd({1, 1, 3, 3}, 20, true), rnd({1, 1, 3, 3}, 21)}));
}

TEST_CASE("attention dropout: generator counters decide the mask, backward reuses it",
          "[autograd][attention][dropout]") {
  Tensor q = rnd({1, 2, 4, 3}, 30), k = rnd({1, 2, 5, 3}, 31), v = rnd({1, 2, 5, 3}, 32);
  Generator g1(3), g2(3);
  Tensor a = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .gen = &g1});
  Tensor b = scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .gen = &g2});
  require_close(a, b, 0.0, 0.0);
  CHECK(g1.offset() == 1 * 2 * 4 * 5);  // one counter per probability
  Tensor plain = scaled_dot_product_attention(q, k, v);
  CHECK(to_doubles(a) != to_doubles(plain));
  auto drop = [](const std::vector<Tensor>& in) {
    Generator gen(8);
    return scaled_dot_product_attention(in[0], in[1], in[2], {.dropout_p = 0.3, .gen = &gen});
  };
  CHECK(gradcheck(drop, {rnd({1, 2, 3, 4}, 33, true), rnd({1, 2, 4, 4}, 34, true), rnd({1, 2, 4, 4}, 35, true)}));
}

TEST_CASE("attention rejects mismatched shapes, masks and dropout", "[autograd][attention]") {
  Tensor q = rnd({1, 2, 3, 4}, 40), k = rnd({1, 2, 5, 4}, 41), v = rnd({1, 2, 5, 4}, 42);
  const auto shape_msg = Catch::Contains("[scaled_dot_product_attention] expected q (B, H, T, D), k and v (B, H, S, D)");
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(rnd({2, 3, 4}, 1), k, v), shape_msg);
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, rnd({1, 2, 5, 3}, 1), v), shape_msg);
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, k, rnd({1, 2, 6, 4}, 1)), shape_msg);
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, rnd({2, 2, 5, 4}, 1), rnd({2, 2, 5, 4}, 1)),
                      Catch::Contains("got q (1, 2, 3, 4), k (2, 2, 5, 4)"));
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.key_padding_mask = ones({1, 5})}),
                      Catch::Contains("expected key_padding_mask (1, 5) bool"));
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.key_padding_mask = padding_mask({1, 1, 1}, {1, 3})}),
                      Catch::Contains("expected key_padding_mask (1, 5)"));
  REQUIRE_THROWS_WITH(scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0}),
                      Catch::Contains("expected dropout_p in [0, 1)"));
}

TEST_CASE("attention: a query that sees no key gives zeros and zero gradients", "[autograd][attention]") {
  Tensor q = rnd({1, 1, 2, 3}, 50, true), k = rnd({1, 1, 3, 3}, 51, true), v = rnd({1, 1, 3, 3}, 52, true);
  Tensor mask = padding_mask({0, 0, 0}, {1, 3});
  Tensor out = scaled_dot_product_attention(q, k, v, {.key_padding_mask = mask});
  require_close(out, zeros({1, 1, 2, 3}), 0.0, 0.0);
  autograd::backward({sum(out)});
  require_close(q.grad(), zeros({1, 1, 2, 3}), 0.0, 0.0);
  require_close(v.grad(), zeros({1, 1, 3, 3}), 0.0, 0.0);
}

TEST_CASE("attention in bf16 is close to f32", "[autograd][attention]") {
  Tensor q = rnd({1, 2, 5, 8}, 60), k = rnd({1, 2, 7, 8}, 61), v = rnd({1, 2, 7, 8}, 62);
  Tensor out = scaled_dot_product_attention(q.to(DType::bf16), k.to(DType::bf16), v.to(DType::bf16), {.causal = true});
  REQUIRE(out.dtype() == DType::bf16);
  require_close(out, scaled_dot_product_attention(q, k, v, {.causal = true}), 5e-2, 3e-2);
}
