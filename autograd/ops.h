// The differentiable op API: validation, dtype promotion and broadcasting happen here, the compute
// runs in kernels/, and each op records its backward node when an input requires grad. Every op
// works on CPU and (when built) CUDA tensors; all inputs must share one device.
//
// Type promotion: binary ops promote with promote_types (bool < i32 < i64 < f16/bf16 < f32);
// a double scalar operand takes the tensor's dtype (an integer tensor with a fractional scalar
// becomes f32). Comparisons return bool.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "core/tensor.h"

namespace tessera {

// ---------------------------------------------------------------- element-wise (ops_elementwise.cc)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "tanh" (GPT-2's) or "none" (erf, exact).
Tensor gelu(const Tensor& x, const std::string& approximate = "tanh");
Tensor silu(const Tensor& x);
Tensor sign(const Tensor& x);  // gradient 0

// Comparisons and logic (no gradient), bool results.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

// cond (bool) broadcast with a and b; gradients flow to a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Either bound may be nullopt. Gradient passes where lo <= x <= hi.
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// In place (bump the version counter; refused on a leaf that requires grad while grad mode is on).
// When self or other requires grad, the updated self becomes the output of a new node chained to
// self's old history. Views are not tracked: an in-place change through a view is not seen by the
// history of the tensor it views (saved copies of it still fail their version check).
const Tensor& add_(const Tensor& self, const Tensor& other, double alpha = 1.0);
const Tensor& mul_(const Tensor& self, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

// ---------------------------------------------------------------- reductions (ops_reduce.cc)
// dims empty = all dims. Negative dims wrap.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Values only; the gradient goes to the first maximal element... (ties split evenly, like PyTorch's amax).
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
// p-norm (p = 2 default; p = INFINITY gives the max-abs norm).
Tensor norm(const Tensor& x, double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Sums x down to `shape` (the inverse of broadcasting), used by backward formulas.
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---------------------------------------------------------------- shape ops (ops_shape.cc)
// Differentiable versions of the Tensor view members; they share storage like them.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor view(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor contiguous(const Tensor& x);
// Differentiable dtype conversion (gradient converted back).
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

// ---------------------------------------------------------------- linear algebra (ops_matmul.cc)
// NumPy semantics: 1-D operands are promoted and the added dim removed; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// y = x @ weight^T + bias; weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---------------------------------------------------------------- neural-network ops (ops_nn.cc)
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// Over the last dim; weight and bias (C) may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Identity unless training and p > 0; the mask comes from the generator's counter (see kernels.h).
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);
// Where x lies in a larger tensor `whole` that a serial layer would drop: x is
// whole.narrow(dim, start, x.size(dim)), and whole.size(dim) is `size` (sequence parallelism: a
// rank's rows (B, T/P, C) of (B, T, C)).
struct DropoutSlice {
  int64_t dim = 0;
  int64_t size = 0;
  int64_t start = 0;
};
// dropout(whole)'s values at x's elements: reserves whole's counters (every rank holding a slice
// advances the generator as the serial dropout does) and keeps x's element where the serial mask
// keeps its flat index in whole. One kernel call per index of the dims before `dim`.
Tensor dropout_slice(const Tensor& x, double p, const DropoutSlice& slice, bool training = true,
                     Generator* gen = nullptr);
// weight (V, C), ids i32/i64 of any shape; out-of-range ids throw naming the id.
Tensor embedding(const Tensor& weight, const Tensor& ids);

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  std::string reduction = "mean";  // "mean" (over non-ignored targets), "sum" or "none"
};
// logits (N, V) or (B, T, V) with targets (N) or (B, T), i64.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& opts = {});

struct AttentionArgs {
  Tensor key_padding_mask{};  // (B, S) bool, true = attend; undefined for none
  bool causal = false;
  double dropout_p = 0.0;
  std::optional<double> scale{};  // default 1/sqrt(D)
  Generator* gen = nullptr;
  // Tensor parallelism: these H heads are heads [head_offset, head_offset + H) of a layer of
  // total_heads (0: H). Dropout then reserves and draws the whole layer's mask, so the shards' masks
  // equal the serial layer's.
  int64_t total_heads = 0;
  int64_t head_offset = 0;
};
// q (B, H, T, D), k, v (B, H, S, D) -> (B, H, T, D), fused (kernels::attention_forward).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionArgs& args = {});

// ---------------------------------------------------------------- autograd utilities
// Runs fn(inputs) without keeping its intermediate activations; backward recomputes them
// (activation checkpointing). Same gradients as calling fn directly. Random ops inside replay the
// same numbers (the default generator's state is restored for the recompute). Recorded whenever
// grad mode is on, even if no input requires grad, so parameters fn uses get their .grad (the
// recompute runs a nested backward into them). No higher-order gradients through a checkpoint.
std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                               const std::vector<Tensor>& inputs);

}  // namespace tessera
