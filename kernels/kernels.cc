// Device dispatch for the kernel API: the one place that picks a backend by the inputs' device.
#include "kernels/kernels.h"

#include "core/profiler.h"

#include "kernels/cpu/adam.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/index.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/softmax.h"

#ifdef TESSERA_CUDA
#include "kernels/cuda/adam.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/index.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/softmax.h"
#endif

// The CUDA backend (absent under --config=cpu): each op adds `TS_ON_CUDA(device, cuda::op(...));`
// before its no_backend line, and its header below.
#ifdef TESSERA_CUDA
#define TS_ON_CUDA(device, call) \
  if ((device).is_cuda()) return call
#else
#define TS_ON_CUDA(device, call)
#endif

namespace tessera::kernels {
namespace {
// Profile names (core/profiler.h): the op itself, so the step profile tells gelu from add.
const char* op_name(UnaryOp op) {
  static const char* const names[] = {
      "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu_tanh",
      "gelu_erf", "silu", "sin", "cos", "reciprocal", "square", "sign", "logical_not"};
  static_assert(sizeof names / sizeof names[0] == size_t(UnaryOp::logical_not) + 1);
  return names[size_t(op)];
}
const char* op_name(BinaryOp op) {
  static const char* const names[] = {
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
      "logical_and", "logical_or", "relu_backward", "gelu_tanh_backward", "gelu_erf_backward",
      "silu_backward", "sigmoid_backward", "tanh_backward"};
  static_assert(sizeof names / sizeof names[0] == size_t(BinaryOp::tanh_backward) + 1);
  return names[size_t(op)];
}
const char* op_name(ReduceOp op) {
  static const char* const names[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                      "argmax", "argmin", "var", "norm"};
  static_assert(sizeof names / sizeof names[0] == size_t(ReduceOp::norm) + 1);
  return names[size_t(op)];
}

[[noreturn]] void no_backend(const char* op, Device d) {
  TS_FAIL(op, "no kernel for device ", d.str(), ": this build or machine has no CUDA backend");
}
}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  TS_PROFILE(op_name(op), "kernel");
  if (x.device().is_cpu()) return cpu::unary(op, x, out);
  TS_ON_CUDA(x.device(), cuda::unary(op, x, out));
  no_backend("unary", x.device());
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  TS_PROFILE(op_name(op), "kernel");
  if (a.device().is_cpu()) return cpu::binary(op, a, b, out);
  TS_ON_CUDA(a.device(), cuda::binary(op, a, b, out));
  no_backend("binary", a.device());
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  TS_PROFILE("where", "kernel");
  if (cond.device().is_cpu()) return cpu::where(cond, a, b, out);
  TS_ON_CUDA(cond.device(), cuda::where(cond, a, b, out));
  no_backend("where", cond.device());
}

void clamp(const Tensor& x, double lo, double hi, const Tensor& out) {
  TS_PROFILE("clamp", "kernel");
  if (x.device().is_cpu()) return cpu::clamp(x, lo, hi, out);
  TS_ON_CUDA(x.device(), cuda::clamp(x, lo, hi, out));
  no_backend("clamp", x.device());
}

void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out, double param) {
  TS_PROFILE(op_name(op), "kernel");
  if (x.device().is_cpu()) return cpu::reduce(op, x, dims, out, param);
  TS_ON_CUDA(x.device(), cuda::reduce(op, x, dims, out, param));
  no_backend("reduce", x.device());
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  TS_PROFILE("matmul", "kernel");
  if (a.device().is_cpu()) return cpu::matmul(a, b, out, accumulate);
  TS_ON_CUDA(a.device(), cuda::matmul(a, b, out, accumulate));
  no_backend("matmul", a.device());
}

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act, const Tensor& out) {
  TS_PROFILE("linear", "kernel");
  if (x.device().is_cpu()) return cpu::linear(x, w, bias, act, out);
  TS_ON_CUDA(x.device(), cuda::linear(x, w, bias, act, out));
  no_backend("linear", x.device());
}

void softmax(const Tensor& x, const Tensor& out) {
  TS_PROFILE("softmax", "kernel");
  if (x.device().is_cpu()) return cpu::softmax(x, out);
  TS_ON_CUDA(x.device(), cuda::softmax(x, out));
  no_backend("softmax", x.device());
}

void log_softmax(const Tensor& x, const Tensor& out) {
  TS_PROFILE("log_softmax", "kernel");
  if (x.device().is_cpu()) return cpu::log_softmax(x, out);
  TS_ON_CUDA(x.device(), cuda::log_softmax(x, out));
  no_backend("log_softmax", x.device());
}

void softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  TS_PROFILE("softmax_backward", "kernel");
  if (y.device().is_cpu()) return cpu::softmax_backward(y, grad_y, grad_x);
  TS_ON_CUDA(y.device(), cuda::softmax_backward(y, grad_y, grad_x));
  no_backend("softmax_backward", y.device());
}

void log_softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  TS_PROFILE("log_softmax_backward", "kernel");
  if (y.device().is_cpu()) return cpu::log_softmax_backward(y, grad_y, grad_x);
  TS_ON_CUDA(y.device(), cuda::log_softmax_backward(y, grad_y, grad_x));
  no_backend("log_softmax_backward", y.device());
}

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  TS_PROFILE("layer_norm", "kernel");
  if (x.device().is_cpu()) return cpu::layer_norm(x, weight, bias, eps, y, mean, rstd);
  TS_ON_CUDA(x.device(), cuda::layer_norm(x, weight, bias, eps, y, mean, rstd));
  no_backend("layer_norm", x.device());
}

void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd, const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias) {
  TS_PROFILE("layer_norm_backward", "kernel");
  if (grad_y.device().is_cpu()) return cpu::layer_norm_backward(grad_y, x, weight, mean, rstd, grad_x, grad_weight, grad_bias);
  TS_ON_CUDA(grad_y.device(), cuda::layer_norm_backward(grad_y, x, weight, mean, rstd, grad_x, grad_weight, grad_bias));
  no_backend("layer_norm_backward", grad_y.device());
}

void dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& out) {
  TS_PROFILE("dropout", "kernel");
  if (x.device().is_cpu()) return cpu::dropout(x, p, seed, offset, out);
  TS_ON_CUDA(x.device(), cuda::dropout(x, p, seed, offset, out));
  no_backend("dropout", x.device());
}

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  TS_PROFILE("embedding", "kernel");
  if (weight.device().is_cpu()) return cpu::embedding(weight, ids, out);
  TS_ON_CUDA(weight.device(), cuda::embedding(weight, ids, out));
  no_backend("embedding", weight.device());
}

void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  TS_PROFILE("embedding_backward", "kernel");
  if (grad_out.device().is_cpu()) return cpu::embedding_backward(grad_out, ids, grad_weight);
  TS_ON_CUDA(grad_out.device(), cuda::embedding_backward(grad_out, ids, grad_weight));
  no_backend("embedding_backward", grad_out.device());
}

void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing, const Tensor& losses, const Tensor& lse) {
  TS_PROFILE("cross_entropy", "kernel");
  if (logits.device().is_cpu()) return cpu::cross_entropy(logits, targets, ignore_index, label_smoothing, losses, lse);
  TS_ON_CUDA(logits.device(), cuda::cross_entropy(logits, targets, ignore_index, label_smoothing, losses, lse));
  no_backend("cross_entropy", logits.device());
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, const Tensor& grad_losses, int64_t ignore_index, double label_smoothing, const Tensor& grad_logits) {
  TS_PROFILE("cross_entropy_backward", "kernel");
  if (logits.device().is_cpu()) return cpu::cross_entropy_backward(logits, targets, lse, grad_losses, ignore_index, label_smoothing, grad_logits);
  TS_ON_CUDA(logits.device(), cuda::cross_entropy_backward(logits, targets, lse, grad_losses, ignore_index, label_smoothing, grad_logits));
  no_backend("cross_entropy_backward", logits.device());
}

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  TS_PROFILE("gather", "kernel");
  if (x.device().is_cpu()) return cpu::gather(x, dim, index, out);
  TS_ON_CUDA(x.device(), cuda::gather(x, dim, index, out));
  no_backend("gather", x.device());
}

void scatter_add(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) {
  TS_PROFILE("scatter_add", "kernel");
  if (src.device().is_cpu()) return cpu::scatter_add(src, dim, index, out);
  TS_ON_CUDA(src.device(), cuda::scatter_add(src, dim, index, out));
  no_backend("scatter_add", src.device());
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask, const AttentionOptions& opts, const Tensor& out, const Tensor& lse) {
  TS_PROFILE("attention_forward", "kernel");
  if (q.device().is_cpu()) return cpu::attention_forward(q, k, v, key_padding_mask, opts, out, lse);
  TS_ON_CUDA(q.device(), cuda::attention_forward(q, k, v, key_padding_mask, opts, out, lse));
  no_backend("attention_forward", q.device());
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& grad_out, const Tensor& key_padding_mask, const AttentionOptions& opts, const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  TS_PROFILE("attention_backward", "kernel");
  if (q.device().is_cpu()) return cpu::attention_backward(q, k, v, out, lse, grad_out, key_padding_mask, opts, grad_q, grad_k, grad_v);
  TS_ON_CUDA(q.device(), cuda::attention_backward(q, k, v, out, lse, grad_out, key_padding_mask, opts, grad_q,
                                                 grad_k, grad_v));
  no_backend("attention_backward", q.device());
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq, const AdamStep& step) {
  TS_PROFILE("adam_update", "kernel");
  if (param.device().is_cpu()) return cpu::adam_update(param, grad, exp_avg, exp_avg_sq, step);
  TS_ON_CUDA(param.device(), cuda::adam_update(param, grad, exp_avg, exp_avg_sq, step));
  no_backend("adam_update", param.device());
}

void adam_update_multi(std::span<const AdamTensors> tensors, const AdamStep& step) {
  TS_PROFILE("adam_update_multi", "kernel");
  if (tensors.empty()) return;
  const Device d = tensors.front().param.defined() ? tensors.front().param.device() : kCPU;
  if (d.is_cpu()) return cpu::adam_update_multi(tensors, step);
  TS_ON_CUDA(d, cuda::adam_update_multi(tensors, step));
  no_backend("adam_update_multi", d);
}

}  // namespace tessera::kernels
