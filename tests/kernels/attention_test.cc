// Tests for the CPU fused attention against a naive reference that materialises the scores in
// double: forward, lse and all three gradients for causal and full attention, T != S, padding masks
// with fully masked rows, dropout, scale override, odd sizes, strided views, 16-bit floats, the
// split-head threading path, and a finite-difference check of the backward against the forward.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "core/factory.h"
#include "core/parallel.h"
#include "core/philox.h"
#include "kernels/cpu/attention.h"

namespace {

using namespace tessera;
using kernels::AttentionOptions;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<double>(p, p + c.numel());
}

Tensor randn_of(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

struct Sizes {
  int64_t B, H, T, S, D;
};

struct Grads {
  std::vector<double> out, lse, dq, dk, dv;
};

// Naive attention in double: full score rows, softmax, dropout factor from the same philox counter.
Grads reference(const Sizes& z, const std::vector<double>& q, const std::vector<double>& k,
                const std::vector<double>& v, const std::vector<double>& go, const std::vector<bool>& mask,
                const AttentionOptions& o) {
  const double scale = o.scale != 0.0f ? o.scale : 1.0 / std::sqrt(double(z.D));
  Grads r{std::vector<double>(z.B * z.H * z.T * z.D), std::vector<double>(z.B * z.H * z.T),
          std::vector<double>(q.size()), std::vector<double>(k.size()), std::vector<double>(v.size())};
  std::vector<double> sc(z.S), p(z.S), f(z.S), dp(z.S);
  for (int64_t b = 0; b < z.B; ++b) {
    for (int64_t h = 0; h < z.H; ++h) {
      const int64_t bh = b * z.H + h;
      for (int64_t t = 0; t < z.T; ++t) {
        const double* qt = q.data() + (bh * z.T + t) * z.D;
        const double* got = go.data() + (bh * z.T + t) * z.D;
        double mx = -INFINITY;
        for (int64_t s = 0; s < z.S; ++s) {
          const bool visible = (mask.empty() || mask[b * z.S + s]) && (!o.causal || s <= t + z.S - z.T);
          double dot = 0.0;
          for (int64_t d = 0; d < z.D; ++d) dot += qt[d] * k[(bh * z.S + s) * z.D + d];
          sc[s] = visible ? dot * scale : -INFINITY;
          mx = std::max(mx, sc[s]);
          // The counter of (t, s) in the layer's whole draw (kernels.h: head and block offsets).
          const int64_t heads = o.dropout_heads > 0 ? o.dropout_heads : z.H;
          const int64_t rows = o.dropout_rows > 0 ? o.dropout_rows : z.T;
          const int64_t cols = o.dropout_cols > 0 ? o.dropout_cols : z.S;
          const int64_t head = b * heads + o.dropout_head_offset + h;
          const uint64_t idx = o.offset + uint64_t((head * rows + o.dropout_row_offset + t) * cols +
                                                   o.dropout_col_offset + s);
          f[s] = philox_uniform(o.seed, idx) >= o.dropout_p ? 1.0 / (1.0 - double(o.dropout_p)) : 0.0;
        }
        double sum = 0.0;
        for (int64_t s = 0; s < z.S; ++s) sum += mx == -INFINITY ? 0.0 : std::exp(sc[s] - mx);
        r.lse[bh * z.T + t] = sum > 0.0 ? mx + std::log(sum) : -INFINITY;
        double di = 0.0;
        for (int64_t s = 0; s < z.S; ++s) {
          p[s] = sum > 0.0 ? std::exp(sc[s] - mx) / sum : 0.0;
          double dpd = 0.0;
          for (int64_t d = 0; d < z.D; ++d) {
            const double vsd = v[(bh * z.S + s) * z.D + d];
            r.out[(bh * z.T + t) * z.D + d] += p[s] * f[s] * vsd;
            r.dv[(bh * z.S + s) * z.D + d] += p[s] * f[s] * got[d];
            dpd += got[d] * vsd;
          }
          dp[s] = dpd * f[s];
          di += p[s] * dp[s];
        }
        for (int64_t s = 0; s < z.S; ++s) {
          const double ds = p[s] * (dp[s] - di) * scale;
          for (int64_t d = 0; d < z.D; ++d) {
            r.dq[(bh * z.T + t) * z.D + d] += ds * k[(bh * z.S + s) * z.D + d];
            r.dk[(bh * z.S + s) * z.D + d] += ds * qt[d];
          }
        }
      }
    }
  }
  return r;
}

// |got - ref| <= tol * max|ref| elementwise (-inf must match exactly), and nothing is NaN.
void check_close(const char* what, const std::vector<double>& got, const std::vector<double>& ref, double tol) {
  INFO(what);
  REQUIRE(got.size() == ref.size());
  // Errors are relative to the tensor's largest value, floored at 1 (inputs are O(1)): with one
  // key the exact dQ and dK are 0 (dS = P * (dP - D) cancels two O(1) sums of D products), and
  // only their rounding noise (~1e-6) remains.
  double mag = 1.0;
  for (double x : ref) mag = std::isfinite(x) ? std::max(mag, std::abs(x)) : mag;
  int64_t bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(ref[i])) {
      bad += got[i] != ref[i];
      continue;
    }
    const double err = std::abs(got[i] - ref[i]);
    worst = std::max(worst, err / mag);
    if (!(err <= tol * mag)) ++bad;
  }
  INFO("worst relative error " << worst);
  CHECK(bad == 0);
}

// How the test lays out its tensors in memory.
enum class Layout { contiguous, strided };

// (B, H, L, D) tensor holding `src`'s values, either dense or as a permuted view of a (B, L, H, 2D)
// buffer (inner stride 1, rows strided by H*2D, like a slice of a fused QKV projection).
Tensor lay_out(const Tensor& src, Layout layout) {
  if (layout == Layout::contiguous) return src.contiguous();
  const int64_t B = src.size(0), H = src.size(1), L = src.size(2), D = src.size(3);
  Tensor buf = full({B, L, H, 2 * D}, 9.0, {.dtype = src.dtype()});
  Tensor view = buf.narrow(3, D, D).permute({0, 2, 1, 3});
  view.copy_(src);
  return view;
}

Tensor out_like(const Shape& shape, DType dtype, Layout layout) {
  return lay_out(full(shape, 5.0, {.dtype = dtype}), layout);
}

struct Case {
  Sizes z;
  AttentionOptions opts;
  bool use_mask = false;
  Layout layout = Layout::contiguous;
  DType dtype = DType::f32;
  double tol = 2e-5;
};

void run_case(const Case& c) {
  const Sizes z = c.z;
  INFO("B=" << z.B << " H=" << z.H << " T=" << z.T << " S=" << z.S << " D=" << z.D
            << " causal=" << c.opts.causal << " mask=" << c.use_mask << " p=" << c.opts.dropout_p);
  Tensor q = lay_out(randn_of({z.B, z.H, z.T, z.D}, 1, c.dtype), c.layout);
  Tensor k = lay_out(randn_of({z.B, z.H, z.S, z.D}, 2, c.dtype), c.layout);
  Tensor v = lay_out(randn_of({z.B, z.H, z.S, z.D}, 3, c.dtype), c.layout);
  Tensor go = lay_out(randn_of({z.B, z.H, z.T, z.D}, 4, c.dtype), c.layout);
  Tensor mask;
  std::vector<bool> mask_v;
  if (c.use_mask) {  // batch 0: every third key hidden; the last batch: every key hidden
    mask_v.resize(size_t(z.B * z.S));
    for (int64_t b = 0; b < z.B; ++b) {
      for (int64_t s = 0; s < z.S; ++s) mask_v[b * z.S + s] = b + 1 < z.B || z.B == 1 ? s % 3 != 1 : false;
    }
    std::vector<float> mf(mask_v.begin(), mask_v.end());
    mask = from_vector(mf, {z.B, z.S}).to(DType::b8);
  }
  Tensor out = out_like({z.B, z.H, z.T, z.D}, c.dtype, c.layout);
  Tensor lse = full({z.B, z.H, z.T}, 3.0);
  kernels::cpu::attention_forward(q, k, v, mask, c.opts, out, lse);
  Tensor gq = out_like(q.shape(), c.dtype, c.layout), gk = out_like(k.shape(), c.dtype, c.layout);
  Tensor gv = out_like(v.shape(), c.dtype, c.layout);
  kernels::cpu::attention_backward(q, k, v, out, lse, go, mask, c.opts, gq, gk, gv);

  const Grads ref = reference(z, values(q), values(k), values(v), values(go), mask_v, c.opts);
  check_close("out", values(out), ref.out, c.tol);
  check_close("lse", values(lse), ref.lse, c.tol);
  check_close("grad_q", values(gq), ref.dq, c.tol);
  check_close("grad_k", values(gk), ref.dk, c.tol);
  check_close("grad_v", values(gv), ref.dv, c.tol);
}

}  // namespace

TEST_CASE("attention odd sizes, causal and full", "[attention]") {
  for (int64_t t : {1, 7, 33, 130}) {
    for (int64_t d : {8, 64}) {
      for (bool causal : {false, true}) run_case({.z = {2, 2, t, t, d}, .opts = {.causal = causal}});
    }
  }
}

TEST_CASE("attention T != S aligns the causal diagonal at the last key", "[attention]") {
  // T > S leaves the first T - S queries with no visible key: zeros, lse = -inf, zero grads.
  for (auto [t, s] : std::vector<std::pair<int64_t, int64_t>>{{7, 20}, {33, 7}, {1, 9}, {130, 250}, {200, 97}}) {
    run_case({.z = {1, 2, t, s, 16}, .opts = {.causal = true}});
    run_case({.z = {1, 2, t, s, 16}, .opts = {.causal = false}});
  }
}

TEST_CASE("attention key padding mask with a fully masked batch", "[attention]") {
  run_case({.z = {2, 3, 33, 33, 8}, .opts = {}, .use_mask = true});
  run_case({.z = {2, 3, 33, 40, 8}, .opts = {.causal = true}, .use_mask = true});
  run_case({.z = {3, 1, 130, 210, 64}, .opts = {.causal = true}, .use_mask = true});
}

TEST_CASE("attention dropout matches the philox mask of the reference", "[attention]") {
  run_case({.z = {2, 2, 33, 40, 8}, .opts = {.dropout_p = 0.1f, .seed = 7, .offset = 123}});
  run_case({.z = {1, 2, 130, 200, 64},
            .opts = {.causal = true, .dropout_p = 0.1f, .seed = 99, .offset = 5},
            .use_mask = true});
}

TEST_CASE("attention dropout of a head shard and a (query, key) block of a larger draw", "[attention]") {
  // Heads [1, 3) of 4; queries [5, 38) of 50 and keys [3, 43) of 47 (sequence parallelism).
  AttentionOptions o{.dropout_p = 0.2f, .seed = 7, .offset = 123};
  o.dropout_heads = 4;
  o.dropout_head_offset = 1;
  o.dropout_rows = 50;
  o.dropout_cols = 47;
  o.dropout_row_offset = 5;
  o.dropout_col_offset = 3;
  run_case({.z = {2, 2, 33, 40, 8}, .opts = o});
  o.causal = true;
  run_case({.z = {2, 2, 33, 40, 8}, .opts = o, .use_mask = true});
  // A block that does not fit its grid is refused.
  Tensor q = zeros({1, 2, 3, 4}), k = zeros({1, 2, 5, 4}), out = zeros({1, 2, 3, 4}), lse = zeros({1, 2, 3});
  AttentionOptions bad{.dropout_p = 0.1f};
  bad.dropout_cols = 6;
  bad.dropout_col_offset = 2;
  CHECK_THROWS_WITH(kernels::cpu::attention_forward(q, k, k, {}, bad, out, lse),
                    Catch::Contains("inside the (3, 6) dropout grid"));
}

TEST_CASE("attention scale override", "[attention]") {
  run_case({.z = {1, 2, 33, 33, 8}, .opts = {.scale = 0.9f}});
  run_case({.z = {1, 1, 7, 130, 64}, .opts = {.causal = true, .scale = 0.05f}});
}

TEST_CASE("attention on strided views and strided outputs", "[attention]") {
  run_case({.z = {2, 3, 33, 33, 8}, .opts = {.causal = true}, .layout = Layout::strided});
  run_case({.z = {1, 2, 130, 100, 64}, .opts = {.dropout_p = 0.2f, .seed = 3}, .use_mask = true,
            .layout = Layout::strided});
  // Inner stride 2: the kernel copies these to dense f32 first.
  Tensor q = randn_of({1, 2, 9, 16}, 1).slice(3, 0, 16, 2);
  Tensor k = randn_of({1, 2, 11, 16}, 2).slice(3, 0, 16, 2), v = randn_of({1, 2, 11, 8}, 3);
  Tensor out = zeros({1, 2, 9, 8}), lse = zeros({1, 2, 9});
  kernels::cpu::attention_forward(q, k, v, {}, {.causal = true}, out, lse);
  const Grads ref = reference({1, 2, 9, 11, 8}, values(q), values(k), values(v), values(out), {},
                              {.causal = true});
  check_close("out (inner stride 2)", values(out), ref.out, 2e-5);
}

TEST_CASE("attention f16 and bf16 compute in f32", "[attention]") {
  run_case({.z = {1, 2, 33, 40, 16}, .opts = {.causal = true}, .dtype = DType::f16, .tol = 3e-3});
  run_case({.z = {1, 2, 33, 40, 16}, .opts = {}, .use_mask = true, .dtype = DType::bf16, .tol = 2e-2});
}

TEST_CASE("attention splits a head's key blocks when threads outnumber heads", "[attention]") {
  const int saved = num_threads();
  set_num_threads(3);
  run_case({.z = {1, 1, 200, 600, 16}, .opts = {.causal = true}});
  run_case({.z = {1, 2, 97, 500, 8}, .opts = {.dropout_p = 0.1f, .seed = 1}, .use_mask = true});
  set_num_threads(saved);
}

TEST_CASE("attention backward matches finite differences of the forward", "[attention]") {
  const AttentionOptions opts{.causal = true, .dropout_p = 0.3f, .seed = 11, .offset = 2};
  Tensor mask = from_vector(std::vector<float>{1, 1, 0, 1, 1}, {1, 5}).to(DType::b8);
  Tensor x[3] = {randn_of({1, 2, 3, 4}, 1), randn_of({1, 2, 5, 4}, 2), randn_of({1, 2, 5, 4}, 3)};
  Tensor go = randn_of({1, 2, 3, 4}, 4);
  auto loss = [&]() {  // sum(out * go) in double
    Tensor out = zeros({1, 2, 3, 4}), lse = zeros({1, 2, 3});
    kernels::cpu::attention_forward(x[0], x[1], x[2], mask, opts, out, lse);
    const std::vector<double> o = values(out), g = values(go);
    double l = 0.0;
    for (size_t i = 0; i < o.size(); ++i) l += o[i] * g[i];
    return l;
  };
  Tensor out = zeros({1, 2, 3, 4}), lse = zeros({1, 2, 3});
  kernels::cpu::attention_forward(x[0], x[1], x[2], mask, opts, out, lse);
  Tensor grads[3] = {zeros(x[0].shape()), zeros(x[1].shape()), zeros(x[2].shape())};
  kernels::cpu::attention_backward(x[0], x[1], x[2], out, lse, go, mask, opts, grads[0], grads[1], grads[2]);
  const double h = 1e-2;
  for (int which = 0; which < 3; ++which) {
    float* data = x[which].data<float>();
    const std::vector<double> analytic = values(grads[which]);
    for (int64_t i = 0; i < x[which].numel(); ++i) {
      const float saved = data[i];
      data[i] = saved + float(h);
      const double up = loss();
      data[i] = saved - float(h);
      const double down = loss();
      data[i] = saved;
      const double numeric = (up - down) / (2 * h);
      INFO("input " << which << " element " << i);
      CHECK(std::abs(numeric - analytic[i]) <= 2e-3 * (1.0 + std::abs(numeric)));
    }
  }
}

TEST_CASE("attention rejects bad shapes and options", "[attention]") {
  Tensor q = zeros({1, 2, 3, 4}), k = zeros({1, 2, 5, 4}), v = zeros({1, 2, 5, 4});
  Tensor out = zeros({1, 2, 3, 4}), lse = zeros({1, 2, 3});
  CHECK_THROWS_AS(kernels::cpu::attention_forward(q, k, zeros({1, 2, 5, 3}), {}, {}, out, lse), ValueError);
  CHECK_THROWS_AS(kernels::cpu::attention_forward(q, k, v, {}, {}, out, zeros({1, 2, 4})), ValueError);
  CHECK_THROWS_AS(kernels::cpu::attention_forward(q, k, v, zeros({1, 5}), {}, out, lse), ValueError);
  CHECK_THROWS_AS(kernels::cpu::attention_forward(q, k, v, {}, {.dropout_p = 1.0f}, out, lse), ValueError);
  CHECK_THROWS_AS(kernels::cpu::attention_backward(q, k, v, out, lse, out, {}, {}, zeros({1, 2, 3, 4}),
                                                   zeros({1, 2, 5, 4}), zeros({1, 2, 4, 4})),
                  ValueError);
}
