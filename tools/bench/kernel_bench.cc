// Tessera side of `bench kernels`: inputs per case and the call that is timed.
#include "tools/bench/kernel_bench.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "kernels/kernels.h"

namespace tessera::bench {
namespace {

constexpr double kEps = 1e-5;

double time_linear(const std::vector<int64_t>& d, const TimingOptions& t) {
  const int64_t m = d[0], k = d[1], n = d[2];
  const Tensor x = randn({m, k}), w = randn({n, k}), b = randn({n});  // (M, K), (N, K), (N)
  return median_seconds([&] { linear(x, w, b); }, t);
}

// The three results of a linear's backward, by the calls autograd's LinearBackward makes: dX = dY W,
// dW = dY^T X (the weight's (N, K) layout) and db = the column sums of dY.
double time_linear_backward(const std::vector<int64_t>& d, const TimingOptions& t) {
  const int64_t m = d[0], k = d[1], n = d[2];
  const Tensor x = randn({m, k}), w = randn({n, k}), gy = randn({m, n});
  return median_seconds(
      [&] {
        matmul(gy, w);
        matmul(transpose(gy, 0, 1), x);
        sum(gy, {0});
      },
      t);
}

double time_layer_norm(const std::vector<int64_t>& d, bool backward, const TimingOptions& t) {
  const int64_t n = d[0], c = d[1];
  const Tensor x = randn({n, c}), w = randn({c}), b = randn({c});
  if (!backward) return median_seconds([&] { layer_norm(x, w, b, kEps); }, t);
  const Tensor y = empty({n, c}), mean = empty({n}), rstd = empty({n}), gy = randn({n, c});
  kernels::layer_norm(x, w, b, kEps, y, mean, rstd);
  return median_seconds(
      [&] {
        kernels::layer_norm_backward(gy, x, w, mean, rstd, empty({n, c}), empty({c}), empty({c}));
      },
      t);
}

double time_softmax(const std::vector<int64_t>& d, bool backward, const TimingOptions& t) {
  const int64_t rows = d[0], cols = d[1];
  const Tensor x = randn({rows, cols});  // (B*H*T, T) attention score rows
  if (!backward) return median_seconds([&] { softmax(x, -1); }, t);
  const Tensor y = empty({rows, cols}), gy = randn({rows, cols});
  kernels::softmax(x, y);
  return median_seconds([&] { kernels::softmax_backward(y, gy, empty({rows, cols})); }, t);
}

double time_gelu(const std::vector<int64_t>& d, bool backward, const TimingOptions& t) {
  const int64_t n = d[0], c = d[1];
  const Tensor x = randn({n, c});  // (N, 4C) MLP hidden activations
  if (!backward) return median_seconds([&] { gelu(x, "tanh"); }, t);
  const Tensor gy = randn({n, c});
  return median_seconds(
      [&] {
        kernels::binary(kernels::BinaryOp::gelu_tanh_backward, x, gy, empty({n, c}));
      },
      t);
}

double time_attention(const std::vector<int64_t>& d, bool backward, const TimingOptions& t) {
  const int64_t b = d[0], h = d[1], s = d[2], hd = d[3];
  const Shape qkv_shape{b, h, s, hd};  // (B, H, T, D)
  const Tensor q = randn(qkv_shape), k = randn(qkv_shape), v = randn(qkv_shape);
  if (!backward) {
    AttentionArgs args;
    args.causal = true;
    return median_seconds([&] { scaled_dot_product_attention(q, k, v, args); }, t);
  }
  kernels::AttentionOptions opts;
  opts.causal = true;
  const Tensor grad_out = randn(qkv_shape);
  return median_seconds(
      [&] {
        const Tensor out = empty(qkv_shape), lse = empty({b, h, s});
        kernels::attention_forward(q, k, v, Tensor(), opts, out, lse);
        kernels::attention_backward(q, k, v, out, lse, grad_out, Tensor(), opts, empty(qkv_shape),
                                    empty(qkv_shape), empty(qkv_shape));
      },
      t);
}

}  // namespace

double time_tessera(const BenchCase& c, const TimingOptions& timing) {
  autograd::NoGradGuard no_grad;
  const std::string& op = c.op;
  if (op == "linear") return time_linear(c.dims, timing);
  if (op == "linear_bwd") return time_linear_backward(c.dims, timing);
  if (op == "layer_norm" || op == "layer_norm_bwd")
    return time_layer_norm(c.dims, op == "layer_norm_bwd", timing);
  if (op == "softmax" || op == "softmax_bwd")
    return time_softmax(c.dims, op == "softmax_bwd", timing);
  if (op == "gelu_tanh" || op == "gelu_tanh_bwd")
    return time_gelu(c.dims, op == "gelu_tanh_bwd", timing);
  if (op == "attention" || op == "attention_fwd_bwd")
    return time_attention(c.dims, op == "attention_fwd_bwd", timing);
  TS_FAIL("bench", "expected a known op, got '", op, "'");
}

}  // namespace tessera::bench
