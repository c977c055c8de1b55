// The raw compute API: one entry point per kernel family, device-dispatched in kernels.cc (CPU now,
// CUDA when that backend is built). These functions know nothing of gradients. Callers (the op
// API in autograd/) validate, promote dtypes, broadcast and allocate outputs first, so kernels see
// only valid input: every tensor on one device, outputs preallocated with the documented shapes.
// Inputs may have any strides (broadcast views with stride 0 included) unless a comment says
// "contiguous". Floating kernels run for f32, f16 and bf16, accumulating in f32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace tessera::kernels {

// ---------------------------------------------------------------- element-wise
enum class UnaryOp : uint8_t {
  neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, gelu_tanh, gelu_erf, silu,
  sin, cos, reciprocal, square, sign, logical_not,
};
// out = op(x); x and out have the same shape; out's dtype equals x's (bool for logical_not).
void unary(UnaryOp op, const Tensor& x, const Tensor& out);

enum class BinaryOp : uint8_t {
  add, sub, mul, div, pow, maximum, minimum,
  eq, ne, lt, le, gt, ge, logical_and, logical_or,  // comparisons and logic write a bool `out`
  // Backward helpers, out = b * f'(a): a is the forward input x (or output y where noted), b the grad.
  relu_backward, gelu_tanh_backward, gelu_erf_backward, silu_backward,
  sigmoid_backward,  // a = y = sigmoid(x)
  tanh_backward,     // a = y = tanh(x)
};
// a, b and out have out's shape (a and b are broadcast views) and a's dtype == b's dtype.
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// out = cond ? a : b; cond is bool; all four share out's shape.
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
// out = min(max(x, lo), hi); a NaN bound means "no bound".
void clamp(const Tensor& x, double lo, double hi, const Tensor& out);

// ---------------------------------------------------------------- reductions
enum class ReduceOp : uint8_t { sum, mean, max, min, argmax, argmin, var, norm };
// Reduces x over `dims` (sorted, unique, non-empty) into out, whose shape is x's with those dims
// set to 1 (keepdim form). argmax/argmin take exactly one dim and write i64. `param` is the
// correction (Bessel: 1) for var, and p (> 0, inf allowed) for norm. Sums accumulate in f32 (f64 for
// i64 inputs is not needed: integer sums accumulate in i64).
void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, const Tensor& out,
            double param = 0.0);

// ---------------------------------------------------------------- matmul
// out (batch..., M, N) = a (batch..., M, K) @ b (batch..., K, N) [+ out if accumulate]. The batch
// dims of a, b, out are equal (a and b may be broadcast views with stride 0). Transposed inner
// layouts are used without a copy.
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate = false);

// ---------------------------------------------------------------- fused linear
enum class Activation : uint8_t { none, gelu_tanh };
// out (M, N) = act(x (M, K) @ w (N, K)^T + bias (N)); bias may be undefined. The bias add and the
// activation run in f32 on the f32 accumulator, so 16-bit outputs are rounded once.
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Activation act, const Tensor& out);

// ---------------------------------------------------------------- softmax family (last dim)
void softmax(const Tensor& x, const Tensor& out);
void log_softmax(const Tensor& x, const Tensor& out);
// grad_x = y * (grad_y - sum(grad_y * y)), y = softmax output.
void softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);
// grad_x = grad_y - exp(y) * sum(grad_y), y = log_softmax output.
void log_softmax_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x);

// ---------------------------------------------------------------- layer norm (last dim, size C)
// y = (x - mean) * rstd * weight + bias. weight, bias (C) may be undefined (no affine).
// mean, rstd: f32 with x's shape minus the last dim.
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd);
// Any of grad_x, grad_weight, grad_bias may be undefined (not needed). grad_weight and grad_bias are
// overwritten, not accumulated.
void layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& grad_x, const Tensor& grad_weight,
                         const Tensor& grad_bias);

// ---------------------------------------------------------------- dropout
// out[i] = keep(i) ? x[i] / (1 - p) : 0, where keep(i) = philox_uniform(seed, offset + i) >= p and i is
// the flat (row-major) index. The backward is the same call on the gradient: the mask is recomputed
// from the counter, never stored.
void dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& out);

// ---------------------------------------------------------------- embedding
// out (ids..., C) = weight (V, C)[ids]; ids i32 or i64, values in [0, V) (checked by the caller).
void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out);
// grad_weight (V, C) += scatter of grad_out (ids..., C) rows; deterministic order.
void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight);

// ---------------------------------------------------------------- cross-entropy
// Fused log-softmax + NLL over logits (N, V) and i64 targets (N). losses (N, f32): 0 where target ==
// ignore_index. With label smoothing s: loss = (1 - s) * nll + s * mean_v(-log_softmax_v).
// lse (N, f32) is saved for the backward.
void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                   double label_smoothing, const Tensor& losses, const Tensor& lse);
// grad_logits (N, V) = d(sum_i grad_losses[i] * losses[i]) / d logits.
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& grad_losses, int64_t ignore_index, double label_smoothing,
                            const Tensor& grad_logits);

// ---------------------------------------------------------------- indexing
// out[..., i, ...] = x[..., index[..., i, ...], ...] along dim (torch.gather). index i64, out's shape.
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
// out[..., index[..., i, ...], ...] += src[..., i, ...] along dim (torch.scatter_add_).
void scatter_add(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);

// ---------------------------------------------------------------- attention
struct AttentionOptions {
  bool causal = false;
  float scale = 0.0f;      // 0: 1/sqrt(D)
  float dropout_p = 0.0f;  // on the probabilities; mask from philox(seed, offset + flat index in (B,H,T,S))
  uint64_t seed = 0;
  uint64_t offset = 0;
  // Heads sharded over tensor-parallel ranks draw the serial layer's mask: the flat index counts
  // dropout_heads heads (0: H) and these H start at head dropout_head_offset.
  int64_t dropout_heads = 0;
  int64_t dropout_head_offset = 0;
  // Sequence parallelism: these T queries and S keys are rows [dropout_row_offset, + T) and
  // columns [dropout_col_offset, + S) of each head of a (dropout_rows, dropout_cols) attention
  // (0: T, S), and the flat index counts that whole attention, so a block of a sharded sequence
  // draws the serial mask (kernels/attention_dropout.h has the formula).
  int64_t dropout_rows = 0, dropout_cols = 0;
  int64_t dropout_row_offset = 0, dropout_col_offset = 0;
};
// Fused scaled dot-product attention, flash style: q (B, H, T, D), k and v (B, H, S, D), out (B, H, T, D),
// lse (B, H, T) f32 log-sum-exp of the scaled, masked scores (saved for the backward).
// key_padding_mask (B, S) bool, true = attend; may be undefined. Causal aligns the last query with the
// last key (query t sees keys <= t + S - T). A row with no visible key gives zeros.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                       const AttentionOptions& opts, const Tensor& out, const Tensor& lse);
// Recomputes probabilities tile by tile from q, k, lse; never materialises (T, S) for the whole head.
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& grad_out, const Tensor& key_padding_mask,
                        const AttentionOptions& opts, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v);

// ---------------------------------------------------------------- optimizers
struct AdamStep {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  bool decoupled = true;  // AdamW (decay the weights) or Adam (add decay to the gradient)
  int64_t step = 1;       // 1-based, for bias correction
};
// In place on contiguous tensors of equal numel: param (f32, or bf16/f16 when master weights live
// elsewhere), grad (any floating), exp_avg and exp_avg_sq (f32).
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& step);

// One parameter's operands of adam_update, for the multi-tensor form.
struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq;
};
// adam_update on every entry with the same AdamStep (hyper-parameters and step count); all entries
// live on one device. On CUDA, entries with equal (param, grad) dtypes share one kernel launch.
void adam_update_multi(std::span<const AdamTensors> tensors, const AdamStep& step);

}  // namespace tessera::kernels
