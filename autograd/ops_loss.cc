// Differentiable cross-entropy: the fused log-softmax + NLL kernel gives per-row losses (with
// ignore_index and label smoothing), and the reduction is composed from differentiable ops on top.
// The loss is f32 whatever the logits' dtype, so a bf16 model still reduces its loss in f32.
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

struct CrossEntropyBackward final : Node {
  SavedTensor logits;  // (N, V)
  Tensor targets;      // (N) i64, a private copy
  Tensor lse;          // (N) f32, private to this node
  Shape logits_shape;  // the caller's logits shape, (N, V) or (B, T, V)
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  std::string name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor lv = logits.unpack("cross_entropy");
    Tensor gl = grads[0].dtype() == DType::f32 ? grads[0] : grads[0].to(DType::f32);  // (N)
    Tensor gx = empty(lv.shape(), {.dtype = lv.dtype(), .device = lv.device()});
    if (gx.numel() > 0) {
      kernels::cross_entropy_backward(lv, targets, lse, gl, ignore_index, label_smoothing, gx);
    }
    return {gx.view(logits_shape)};
  }
  void release_saved() override {
    logits.reset();
    targets = Tensor();
    lse = Tensor();
  }
};

// Checks every target is in [0, v) or equals ignore_index; returns how many are not ignored.
int64_t check_targets(const Tensor& targets, int64_t v, int64_t ignore_index) {
  Tensor host = targets.device().is_cpu() ? targets.contiguous() : targets.to(kCPU).contiguous();
  const int64_t* p = host.data<int64_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (p[i] == ignore_index) continue;
    TS_CHECK(p[i] >= 0 && p[i] < v, "cross_entropy", "expected targets in [0, ", v, ") or ignore_index ",
             ignore_index, ", got target ", p[i], " at flat index ", i, " (V = ", v, ")");
    ++counted;
  }
  return counted;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& opts) {
  TS_CHECK(logits.defined() && targets.defined(), "cross_entropy", "expected defined logits and targets");
  TS_CHECK(is_floating(logits.dtype()), "cross_entropy", "expected floating logits (f32, f16, bf16), got ",
           logits.describe());
  TS_CHECK(targets.dtype() == DType::i64 || targets.dtype() == DType::i32, "cross_entropy",
           "expected i64 targets, got ", targets.describe());
  TS_CHECK((logits.dim() == 2 || logits.dim() == 3) && targets.dim() == logits.dim() - 1 &&
               Shape(logits.shape().begin(), logits.shape().end() - 1) == targets.shape(),
           "cross_entropy", "expected logits (N, V) with targets (N), or (B, T, V) with (B, T), got ",
           shape_str(logits.shape()), " and ", shape_str(targets.shape()));
  TS_CHECK(logits.device() == targets.device(), "cross_entropy", "expected logits and targets on one device, got ",
           logits.describe(), " and ", targets.describe());
  TS_CHECK(opts.reduction == "mean" || opts.reduction == "sum" || opts.reduction == "none", "cross_entropy",
           "expected reduction \"mean\", \"sum\" or \"none\", got \"", opts.reduction, "\"");
  TS_CHECK(opts.label_smoothing >= 0.0 && opts.label_smoothing <= 1.0, "cross_entropy",
           "expected label_smoothing in [0, 1], got ", opts.label_smoothing);
  const int64_t v = logits.size(-1);
  const int64_t n = targets.numel();
  TS_CHECK(v > 0 || n == 0, "cross_entropy", "expected at least one class, got logits ", shape_str(logits.shape()));
  Tensor tgt = (targets.dtype() == DType::i64 ? targets : targets.to(DType::i64)).reshape({n});  // (N)
  const int64_t counted = check_targets(tgt, v, opts.ignore_index);

  Tensor logits2 = logits.reshape({n, v});  // (N, V)
  Tensor losses = empty({n}, {.dtype = DType::f32, .device = logits.device()});
  Tensor lse = empty({n}, {.dtype = DType::f32, .device = logits.device()});
  if (n > 0) kernels::cross_entropy(logits2, tgt, opts.ignore_index, opts.label_smoothing, losses, lse);
  if (auto node = make_node<CrossEntropyBackward>({&logits})) {
    node->logits = SavedTensor(logits2);
    // A private copy: the caller may reuse its targets buffer before backward runs.
    node->targets = tgt.storage() == targets.storage() ? tgt.clone() : tgt;
    node->lse = lse;
    node->logits_shape = logits.shape();
    node->ignore_index = opts.ignore_index;
    node->label_smoothing = opts.label_smoothing;
    set_history(losses, node);
  }

  if (opts.reduction == "none") return reshape(losses, targets.shape());
  Tensor total = sum(losses);
  if (opts.reduction == "sum") return total;
  // Mean over the targets that count; all ignored gives 0 / 0 = NaN, as in PyTorch.
  return div(total, double(counted));
}

}  // namespace tessera
