// Differentiable neural-network ops over the kernels: softmax and log-softmax (any dim), layer norm
// (last dim), counter-based dropout and embedding lookup. Their backwards call the fused backward
// kernels, so they are not themselves differentiable (no double backward through these ops).
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace tessera {
namespace {

using autograd::make_node;
using autograd::Node;
using autograd::SavedTensor;
using autograd::set_history;

void check_floating(const char* op, const Tensor& t, const char* what) {
  TS_CHECK(t.defined(), op, "expected a defined ", what);
  TS_CHECK(is_floating(t.dtype()), op, "expected a floating ", what, " (f32, f16, bf16), got ", t.describe());
}

// ---------------------------------------------------------------- softmax family
// The kernels work over the last dim; another dim is moved there with a transposed view (no copy),
// and the result is moved back the same way.
enum class SoftmaxKind { softmax, log_softmax };

const char* softmax_name(SoftmaxKind kind) { return kind == SoftmaxKind::softmax ? "softmax" : "log_softmax"; }

struct SoftmaxBackward final : Node {
  SoftmaxKind kind = SoftmaxKind::softmax;
  int64_t dim = -1;  // the reduced dim, already wrapped
  SavedTensor y;     // the forward's output
  std::string name() const override {
    return kind == SoftmaxKind::softmax ? "SoftmaxBackward" : "LogSoftmaxBackward";
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor yv = y.unpack(softmax_name(kind));
    const int64_t last = yv.dim() - 1;
    Tensor yt = yv.transpose(dim, last), gt = grads[0].transpose(dim, last);
    Tensor gx = empty(yt.shape(), {.dtype = yv.dtype(), .device = yv.device()});
    if (gx.numel() > 0) {
      if (kind == SoftmaxKind::softmax) {
        kernels::softmax_backward(yt, gt, gx);
      } else {
        kernels::log_softmax_backward(yt, gt, gx);
      }
    }
    return {gx.transpose(dim, last)};
  }
  void release_saved() override { y.reset(); }
};

Tensor softmax_impl(SoftmaxKind kind, const Tensor& x, int64_t dim) {
  const char* op = softmax_name(kind);
  check_floating(op, x, "input");
  if (x.dim() == 0) return squeeze(softmax_impl(kind, unsqueeze(x, 0), 0), 0);
  const int64_t d = wrap_dim(dim, x.dim(), op), last = x.dim() - 1;
  Tensor xt = x.transpose(d, last);
  Tensor yt = empty(xt.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (yt.numel() > 0) {
    if (kind == SoftmaxKind::softmax) {
      kernels::softmax(xt, yt);
    } else {
      kernels::log_softmax(xt, yt);
    }
  }
  Tensor y = yt.transpose(d, last);
  if (auto node = make_node<SoftmaxBackward>({&x})) {
    node->kind = kind;
    node->dim = d;
    node->y = SavedTensor(y.detach());  // detached: the node must not own its own output's history
    set_history(y, node);
  }
  return y;
}

// ---------------------------------------------------------------- layer norm
struct LayerNormBackward final : Node {
  SavedTensor x, weight;  // x (..., C), weight (C) or undefined
  Tensor mean, rstd;      // (...) f32, private to this node
  bool has_weight = false;
  std::string name() const override { return "LayerNormBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(3);
    if (!grads[0].defined()) return out;
    Tensor xv = x.unpack("layer_norm");
    Tensor wv = has_weight ? weight.unpack("layer_norm") : Tensor();
    const int64_t c = xv.size(-1);
    const TensorOptions wopts{.dtype = has_weight ? wv.dtype() : xv.dtype(), .device = xv.device()};
    if (needs_input_grad(0)) out[0] = empty(xv.shape(), {.dtype = xv.dtype(), .device = xv.device()});
    if (needs_input_grad(1)) out[1] = empty({c}, wopts);
    if (needs_input_grad(2)) out[2] = empty({c}, wopts);
    if (xv.numel() == 0) {
      for (Tensor& t : out)
        if (t.defined()) t.zero_();
      return out;
    }
    kernels::layer_norm_backward(grads[0], xv, wv, mean, rstd, out[0], out[1], out[2]);
    return out;
  }
  void release_saved() override {
    x.reset();
    weight.reset();
    mean = Tensor();
    rstd = Tensor();
  }
};

// ---------------------------------------------------------------- dropout
struct DropoutBackward final : Node {
  double p = 0.0;
  uint64_t seed = 0, offset = 0;  // the forward's counters: the mask is recomputed, never stored
  std::string name() const override { return "DropoutBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor gx = empty(grads[0].shape(), {.dtype = grads[0].dtype(), .device = grads[0].device()});
    if (gx.numel() > 0) kernels::dropout(grads[0], p, seed, offset, gx);
    return {gx};
  }
};

// The serial mask of `whole` on its slice x (see DropoutSlice), written into out (contiguous, x's
// shape). x viewed as (outer, n * inner) rows: row o starts at whole's flat index
// (o * size + start) * inner, and each row is one contiguous run of whole's counters.
void dropout_slice_kernel(const Tensor& x, double p, uint64_t seed, uint64_t offset,
                          const DropoutSlice& s, const Tensor& out) {
  const int64_t n = x.size(s.dim);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < s.dim; ++i) outer *= x.size(i);
  for (int64_t i = s.dim + 1; i < x.dim(); ++i) inner *= x.size(i);
  if (outer * n * inner == 0) return;
  Tensor rows = x.contiguous().view({outer, n * inner});
  Tensor out_rows = out.view({outer, n * inner});
  for (int64_t o = 0; o < outer; ++o) {
    const uint64_t first = offset + uint64_t((o * s.size + s.start) * inner);
    kernels::dropout(rows.select(0, o), p, seed, first, out_rows.select(0, o));
  }
}

struct DropoutSliceBackward final : Node {
  double p = 0.0;
  uint64_t seed = 0, offset = 0;  // the forward's counters: the mask is recomputed, never stored
  DropoutSlice slice;             // dim wrapped
  std::string name() const override { return "DropoutSliceBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor gx = empty(grads[0].shape(), {.dtype = grads[0].dtype(), .device = grads[0].device()});
    dropout_slice_kernel(grads[0], p, seed, offset, slice, gx);
    return {gx};
  }
};

// ---------------------------------------------------------------- embedding
struct EmbeddingBackward final : Node {
  SavedTensor ids;
  int64_t num_embeddings = 0;
  DType dtype = DType::f32;
  std::string name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor& g = grads[0];  // (ids..., C)
    Tensor gw = zeros({num_embeddings, g.size(-1)}, {.dtype = dtype, .device = g.device()});
    if (g.numel() > 0) kernels::embedding_backward(g, ids.unpack("embedding"), gw);
    return {gw};
  }
  // The table's gradient scattered into one already waiting (a tied LM head's): the kernel adds.
  bool apply_into(const std::vector<Tensor>& grads, const std::vector<Tensor*>& sums) override {
    if (!grads[0].defined() || !sums[0]) return false;
    const Tensor& g = grads[0];
    Tensor& sum = *sums[0];
    if (sum.shape() != Shape{num_embeddings, g.size(-1)} || sum.dtype() != dtype ||
        sum.device() != g.device())
      return false;
    if (g.numel() > 0) kernels::embedding_backward(g, ids.unpack("embedding"), sum);
    return true;
  }
  void release_saved() override { ids.reset(); }
};

// Throws naming the first id outside [0, v).
void check_ids(const Tensor& ids, int64_t v) {
  Tensor host = ids.device().is_cpu() ? ids.contiguous() : ids.to(kCPU).contiguous();
  auto scan = [&]<typename I>() {
    const I* p = host.data<I>();
    for (int64_t i = 0; i < host.numel(); ++i) {
      TS_CHECK(p[i] >= 0 && int64_t(p[i]) < v, "embedding", "expected ids in [0, ", v, "), got id ",
               int64_t(p[i]), " at flat index ", i, " (V = ", v, ")");
    }
  };
  if (host.dtype() == DType::i32) {
    scan.template operator()<int32_t>();
  } else {
    scan.template operator()<int64_t>();
  }
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(SoftmaxKind::softmax, x, dim); }

Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(SoftmaxKind::log_softmax, x, dim); }

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_floating("layer_norm", x, "input");
  TS_CHECK(x.dim() >= 1, "layer_norm", "expected an input of at least 1 dim, got ", x.describe());
  const int64_t c = x.size(-1);
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    TS_CHECK(p->shape() == Shape{c}, "layer_norm", "expected weight and bias of shape (", c, ") for input ",
             shape_str(x.shape()), ", got ", shape_str(p->shape()));
    TS_CHECK(p->dtype() == x.dtype() && p->device() == x.device(), "layer_norm",
             "expected weight and bias with the input's dtype and device (", x.describe(), "), got ",
             p->describe());
  }
  TS_CHECK(eps >= 0.0, "layer_norm", "expected eps >= 0, got ", eps);
  Tensor y = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  Shape stat_shape(x.shape().begin(), x.shape().end() - 1);
  Tensor mean = empty(stat_shape, {.dtype = DType::f32, .device = x.device()});
  Tensor rstd = empty(stat_shape, {.dtype = DType::f32, .device = x.device()});
  if (x.numel() > 0) kernels::layer_norm(x, weight, bias, eps, y, mean, rstd);
  if (auto node = make_node<LayerNormBackward>({&x, &weight, &bias})) {
    node->x = SavedTensor(x);
    if (weight.defined()) node->weight = SavedTensor(weight);
    node->has_weight = weight.defined();
    node->mean = mean;
    node->rstd = rstd;
    set_history(y, node);
  }
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_floating("dropout", x, "input");
  TS_CHECK(p >= 0.0 && p < 1.0, "dropout", "expected p in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  Generator& g = gen ? *gen : default_generator();
  const uint64_t offset = g.reserve(uint64_t(x.numel()));
  const uint64_t seed = g.seed();
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (out.numel() > 0) kernels::dropout(x, p, seed, offset, out);
  if (auto node = make_node<DropoutBackward>({&x})) {
    node->p = p;
    node->seed = seed;
    node->offset = offset;
    set_history(out, node);
  }
  return out;
}

Tensor dropout_slice(const Tensor& x, double p, const DropoutSlice& slice, bool training,
                     Generator* gen) {
  check_floating("dropout_slice", x, "input");
  TS_CHECK(p >= 0.0 && p < 1.0, "dropout_slice", "expected p in [0, 1), got ", p);
  TS_CHECK(x.dim() >= 1, "dropout_slice", "expected a tensor with at least one dim, got ",
           x.describe());
  DropoutSlice s = slice;
  s.dim = wrap_dim(slice.dim, x.dim(), "dropout_slice");
  TS_CHECK(s.start >= 0 && s.start + x.size(s.dim) <= s.size, "dropout_slice",
           "expected the slice [start, start + x.size(dim)) = [", s.start, ", ",
           s.start + x.size(s.dim), ") inside a whole dim ", s.dim, " of size ", s.size, ", got x ",
           x.describe());
  if (!training || p == 0.0) return x;
  Generator& g = gen ? *gen : default_generator();
  int64_t whole = s.size;  // whole.numel(): every rank reserves what the serial dropout reserves
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != s.dim) whole *= x.size(i);
  const uint64_t offset = g.reserve(uint64_t(whole));
  const uint64_t seed = g.seed();
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  dropout_slice_kernel(x, p, seed, offset, s, out);
  if (auto node = make_node<DropoutSliceBackward>({&x})) {
    node->p = p;
    node->seed = seed;
    node->offset = offset;
    node->slice = s;
    set_history(out, node);
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_floating("embedding", weight, "weight");
  TS_CHECK(weight.dim() == 2, "embedding", "expected weight (V, C), got ", shape_str(weight.shape()));
  TS_CHECK(ids.defined() && (ids.dtype() == DType::i32 || ids.dtype() == DType::i64), "embedding",
           "expected ids of dtype i32 or i64, got ", ids.defined() ? ids.describe() : std::string("undefined"));
  TS_CHECK(ids.device() == weight.device(), "embedding", "expected ids and weight on one device, got ",
           ids.describe(), " and ", weight.describe());
  const int64_t v = weight.size(0), c = weight.size(1);
  check_ids(ids, v);
  Shape out_shape = ids.shape();
  out_shape.push_back(c);
  Tensor out = empty(out_shape, {.dtype = weight.dtype(), .device = weight.device()});
  if (out.numel() > 0) kernels::embedding(weight, ids, out);
  if (auto node = make_node<EmbeddingBackward>({&weight})) {
    node->ids = SavedTensor(ids);
    node->num_embeddings = v;
    node->dtype = weight.dtype();
    set_history(out, node);
  }
  return out;
}

}  // namespace tessera
