// Differentiable matrix products: matmul with NumPy semantics (1-D promotion, batch broadcasting)
// and linear (one GEMM over the flattened leading dims of x, the bias added as the GEMM stores).
#include <functional>

#include "autograd/deferred_grad.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using autograd::set_history;
using autograd::WeightGradQueue;

// The common floating dtype of the operands; integer or bool operands are refused.
DType floating_result_type(const char* op, std::initializer_list<const Tensor*> ts) {
  DType common = (*ts.begin())->dtype();
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    TS_CHECK(is_floating(t->dtype()), op, "expected floating operands (f32, f16, bf16), got ", t->describe());
    common = promote_types(common, t->dtype());
  }
  return common;
}

Tensor as_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : to_dtype(t, dtype); }

// out (batch..., M, N) = a (batch_a..., M, K) @ b (batch_b..., K, N), both at least 2-D, same dtype.
Tensor raw_batched_matmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  Shape a_shape = batch, b_shape = batch, out_shape = batch;
  a_shape.insert(a_shape.end(), {m, k});
  b_shape.insert(b_shape.end(), {k, n});
  out_shape.insert(out_shape.end(), {m, n});
  Tensor out = empty(out_shape, {.dtype = a.dtype(), .device = a.device()});
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();  // an empty sum
  kernels::matmul(a.shape() == a_shape ? a : a.expand(a_shape), b.shape() == b_shape ? b : b.expand(b_shape),
                  out);
  return out;
}

// Queues `compute` over `saved` for a deferred weight gradient. The tensors are kept as
// SavedTensors, so W throws if one was modified in place since B instead of using changed data.
void defer(WeightGradQueue& queue, const autograd::Edge& edge, const char* op,
           std::vector<Tensor> saved, std::function<Tensor(const std::vector<Tensor>&)> compute) {
  std::vector<SavedTensor> kept;
  for (const Tensor& t : saved) kept.emplace_back(t.detach());  // data only: no graph kept alive
  queue.push(edge, [op, kept = std::move(kept), compute = std::move(compute)] {
    std::vector<Tensor> ts;
    for (const SavedTensor& s : kept) ts.push_back(s.unpack(op));
    return compute(ts);
  });
}

// Gradient of matmul's right operand b from a (batch_a..., M, K) and g (batch..., M, N).
Tensor matmul_grad_b(const Tensor& a, const Tensor& g, const Shape& b_shape) {
  const int64_t k = a.size(-1), n = g.size(-1);
  if (b_shape.size() == 2 && a.dim() > 2) {
    // A weight shared by every batch entry: one GEMM over all the flattened rows instead of a
    // batched product followed by a reduction.
    const int64_t rows = shape_numel(Shape(a.shape().begin(), a.shape().end() - 1));
    return matmul(transpose(reshape(a, {rows, k}), 0, 1), reshape(g, {rows, n}));
  }
  return sum_to(matmul(transpose(a, -1, -2), g), b_shape);
}

// Gradients of a batched product whose operands are at least 2-D. The backward is written with the
// differentiable ops, so it records a graph itself under create_graph. Under DeferWeightGrads a
// leaf b's gradient is queued (a weight used via matmul).
struct MatmulBackward final : Node {
  SavedTensor a, b;
  std::string name() const override { return "MatmulBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];  // (batch..., M, N)
    std::vector<Tensor> out(2);
    if (!g.defined()) return out;
    Tensor av = a.unpack("matmul"), bv = b.unpack("matmul");
    if (needs_input_grad(0)) {
      out[0] = sum_to(matmul(g, transpose(bv, -1, -2)), av.shape());
    }
    if (needs_input_grad(1)) {
      if (WeightGradQueue* queue = autograd::weight_grad_queue_for(*this, 1)) {
        defer(*queue, next_edges[1], "matmul", {av, g},
              [b_shape = bv.shape()](const std::vector<Tensor>& t) {
                return matmul_grad_b(t[0], t[1], b_shape);
              });
      } else {
        out[1] = matmul_grad_b(av, g, bv.shape());
      }
    }
    return out;
  }
  void release_saved() override {
    a.reset();
    b.reset();
  }
};

Tensor matmul_2d_plus(const Tensor& a, const Tensor& b) {
  Tensor out = raw_batched_matmul(a, b);
  if (auto node = make_node<MatmulBackward>({&a, &b})) {
    node->a = SavedTensor(a);
    node->b = SavedTensor(b);
    set_history(out, node);
  }
  return out;
}

// linear's weight gradient (out, in) from g (rows, out) and x2 (rows, in): one GEMM over all rows.
Tensor linear_grad_weight(const Tensor& g, const Tensor& x2) {
  return matmul(transpose(g, 0, 1), x2);
}
Tensor linear_grad_bias(const Tensor& g) { return sum(g, {0}); }  // (out)

// Under DeferWeightGrads the weight's and bias's gradients are queued when they go to leaves.
struct LinearBackward final : Node {
  SavedTensor x, weight;  // x (..., in), weight (out, in)
  Shape x_shape;
  int64_t rows = 0;  // x's leading dims flattened
  std::string name() const override { return "LinearBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(3);
    if (!grads[0].defined()) return out;
    Tensor w = weight.unpack("linear");
    Tensor g = reshape(grads[0], {rows, w.size(0)});  // (rows, out)
    if (needs_input_grad(0)) out[0] = reshape(matmul(g, w), x_shape);
    if (needs_input_grad(1)) {
      Tensor x2 = reshape(x.unpack("linear"), {rows, w.size(1)});  // (rows, in)
      if (WeightGradQueue* queue = autograd::weight_grad_queue_for(*this, 1)) {
        defer(*queue, next_edges[1], "linear", {g, x2},
              [](const std::vector<Tensor>& t) { return linear_grad_weight(t[0], t[1]); });
      } else {
        out[1] = linear_grad_weight(g, x2);
      }
    }
    if (needs_input_grad(2)) {
      if (WeightGradQueue* queue = autograd::weight_grad_queue_for(*this, 2)) {
        defer(*queue, next_edges[2], "linear", {g},
              [](const std::vector<Tensor>& t) { return linear_grad_bias(t[0]); });
      } else {
        out[2] = linear_grad_bias(g);
      }
    }
    return out;
  }
  void release_saved() override {
    x.reset();
    weight.reset();
  }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.defined() && b.defined(), "matmul", "expected defined operands");
  TS_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "expected operands of at least 1 dim, got ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  TS_CHECK(a.device() == b.device(), "matmul", "expected operands on one device, got ", a.describe(), " and ",
           b.describe());
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  TS_CHECK(ka == kb, "matmul", "expected inner dims to match, got ", shape_str(a.shape()), " and ",
           shape_str(b.shape()));
  const DType dtype = floating_result_type("matmul", {&a, &b});
  // 1-D operands become matrices ((K) -> (1, K) on the left, (K, 1) on the right); the added dim
  // is removed from the result.
  Tensor a2 = as_dtype(a.dim() == 1 ? unsqueeze(a, 0) : a, dtype);
  Tensor b2 = as_dtype(b.dim() == 1 ? unsqueeze(b, 1) : b, dtype);
  Tensor out = matmul_2d_plus(a2, b2);
  if (b.dim() == 1) out = squeeze(out, -1);
  if (a.dim() == 1) out = squeeze(out, -2 + (b.dim() == 1 ? 1 : 0));
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TS_CHECK(x.defined() && weight.defined(), "linear", "expected defined x and weight");
  TS_CHECK(weight.dim() == 2, "linear", "expected weight (out, in), got ", shape_str(weight.shape()));
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  TS_CHECK(x.dim() >= 1 && x.size(-1) == in_f, "linear", "expected x (..., ", in_f, ") for weight ",
           shape_str(weight.shape()), ", got ", shape_str(x.shape()));
  TS_CHECK(!bias.defined() || bias.shape() == Shape{out_f}, "linear", "expected bias (", out_f, "), got ",
           shape_str(bias.shape()));
  TS_CHECK(x.device() == weight.device() && (!bias.defined() || bias.device() == x.device()), "linear",
           "expected x, weight and bias on one device, got ", x.describe(), ", ", weight.describe(),
           bias.defined() ? ", " + bias.describe() : std::string());
  const DType dtype = floating_result_type("linear", {&x, &weight, &bias});
  if (x.dtype() != dtype || weight.dtype() != dtype || (bias.defined() && bias.dtype() != dtype)) {
    return linear(as_dtype(x, dtype), as_dtype(weight, dtype), bias.defined() ? as_dtype(bias, dtype) : bias);
  }

  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = shape_numel(out_shape);
  out_shape.push_back(out_f);
  Tensor x2 = x.reshape({rows, in_f});  // (rows, in); copies only when x's layout needs it
  Tensor out2 = empty({rows, out_f}, {.dtype = dtype, .device = x.device()});
  if (out2.numel() > 0) {
    // One GEMM writes the output: the bias joins as it stores (the CPU micro-kernels, cuBLASLt's
    // bias epilogue), so neither a bias nor a zero fill takes a pass of its own.
    if (bias.defined()) {
      kernels::linear(x2, weight, bias, kernels::Activation::none, out2);
    } else if (in_f > 0) {
      kernels::matmul(x2, weight.transpose(0, 1), out2);
    } else {
      out2.zero_();
    }
  }
  Tensor out = out2.view(out_shape);
  if (auto node = make_node<LinearBackward>({&x, &weight, &bias})) {
    node->x = SavedTensor(x);
    node->weight = SavedTensor(weight);
    node->x_shape = x.shape();
    node->rows = rows;
    set_history(out, node);
  }
  return out;
}

}  // namespace tessera
