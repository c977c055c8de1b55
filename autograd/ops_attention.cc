// Differentiable fused scaled dot-product attention: validation and dropout counters here, the
// flash-style forward and backward in kernels::attention_forward / attention_backward.
#include <cmath>
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

constexpr const char* kOp = "scaled_dot_product_attention";

struct AttentionBackward final : Node {
  SavedTensor q, k, v;          // (B, H, T, D), (B, H, S, D), (B, H, S, D)
  SavedTensor out;              // (B, H, T, D), detached forward output
  Tensor lse;                   // (B, H, T) f32, private to this node
  Tensor key_padding_mask;      // (B, S) bool or undefined
  kernels::AttentionOptions opts;  // carries the dropout counters of the forward
  std::string name() const override { return "AttentionBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> result(3);
    if (!grads[0].defined()) return result;
    Tensor qv = q.unpack(kOp), kv = k.unpack(kOp), vv = v.unpack(kOp), ov = out.unpack(kOp);
    const TensorOptions to{.dtype = qv.dtype(), .device = qv.device()};
    // The kernel writes all three; unneeded ones are computed and dropped (they share one pass).
    Tensor gq = empty(qv.shape(), to), gk = empty(kv.shape(), to), gv = empty(vv.shape(), to);
    if (qv.numel() == 0 || kv.numel() == 0) {
      gq.zero_();
      gk.zero_();
      gv.zero_();
    } else {
      kernels::attention_backward(qv, kv, vv, ov, lse, grads[0], key_padding_mask, opts, gq, gk, gv);
    }
    if (needs_input_grad(0)) result[0] = gq;
    if (needs_input_grad(1)) result[1] = gk;
    if (needs_input_grad(2)) result[2] = gv;
    return result;
  }
  void release_saved() override {
    q.reset();
    k.reset();
    v.reset();
    out.reset();
    lse = Tensor();
    key_padding_mask = Tensor();
  }
};

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionArgs& args) {
  TS_CHECK(q.defined() && k.defined() && v.defined(), kOp, "expected defined q, k and v");
  const bool four_d = q.dim() == 4 && k.dim() == 4 && v.dim() == 4;
  TS_CHECK(four_d && q.size(0) == k.size(0) && q.size(0) == v.size(0) && q.size(1) == k.size(1) &&
               q.size(1) == v.size(1) && q.size(3) == k.size(3) && q.size(3) == v.size(3) &&
               k.size(2) == v.size(2),
           kOp, "expected q (B, H, T, D), k and v (B, H, S, D), got q ", shape_str(q.shape()), ", k ",
           shape_str(k.shape()), ", v ", shape_str(v.shape()));
  TS_CHECK(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), kOp,
           "expected q, k and v of one floating dtype, got ", q.describe(), ", ", k.describe(), ", ",
           v.describe());
  TS_CHECK(k.device() == q.device() && v.device() == q.device(), kOp, "expected q, k and v on one device, got ",
           q.describe(), ", ", k.describe(), ", ", v.describe());
  const Tensor& mask = args.key_padding_mask;
  if (mask.defined()) {
    const Shape want{q.size(0), k.size(2)};
    TS_CHECK(mask.dtype() == DType::b8 && mask.shape() == want && mask.device() == q.device(), kOp,
             "expected key_padding_mask ", shape_str(want), " bool on ", q.device().str(), ", got ",
             mask.describe());
  }
  TS_CHECK(args.dropout_p >= 0.0 && args.dropout_p < 1.0, kOp, "expected dropout_p in [0, 1), got ",
           args.dropout_p);
  TS_CHECK(!args.scale.has_value() || std::isfinite(*args.scale), kOp, "expected a finite scale, got ",
           args.scale.value_or(0.0));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionArgs& args) {
  check_inputs(q, k, v, args);
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), s = k.size(2), d = q.size(3);
  kernels::AttentionOptions opts;
  opts.causal = args.causal;
  // An explicit scale is passed as is; the default is resolved here so a zero D cannot divide by 0.
  opts.scale = float(args.scale.value_or(d > 0 ? 1.0 / std::sqrt(double(d)) : 1.0));
  opts.dropout_p = float(args.dropout_p);
  if (args.dropout_p > 0.0) {
    Generator& g = args.gen ? *args.gen : default_generator();
    const int64_t heads = args.total_heads > 0 ? args.total_heads : h;
    TS_CHECK(args.head_offset >= 0 && args.head_offset + h <= heads, kOp, "expected heads [",
             args.head_offset, ", ", args.head_offset + h, ") inside total_heads ", heads);
    // One counter per (B, heads, T, S) probability of the whole layer.
    opts.offset = g.reserve(uint64_t(b * heads * t * s));
    opts.seed = g.seed();
    opts.dropout_heads = heads;
    opts.dropout_head_offset = args.head_offset;
  }
  Tensor out = empty(q.shape(), {.dtype = q.dtype(), .device = q.device()});  // (B, H, T, D)
  Tensor lse = empty({b, h, t}, {.dtype = DType::f32, .device = q.device()});
  if (out.numel() > 0) {
    if (s == 0) {
      out.zero_();  // no key to attend to: zeros, as for a fully masked row
      lse.fill_(-INFINITY);
    } else {
      kernels::attention_forward(q, k, v, args.key_padding_mask, opts, out, lse);
    }
  }
  if (auto node = make_node<AttentionBackward>({&q, &k, &v})) {
    node->q = SavedTensor(q);
    node->k = SavedTensor(k);
    node->v = SavedTensor(v);
    node->out = SavedTensor(out.detach());
    node->lse = lse;
    node->key_padding_mask = args.key_padding_mask;
    node->opts = opts;
    set_history(out, node);
  }
  return out;
}

}  // namespace tessera
