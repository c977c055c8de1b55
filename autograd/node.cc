// Graph nodes: creation order, saved tensors with in-place detection, the leaf gradient sink and
// the wiring of op outputs to their nodes.
#include "autograd/node.h"

#include <atomic>
#include <limits>

#include "autograd/deferred_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace tessera::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

SavedTensor::SavedTensor(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  data_ = t.detach();
  version_ = t.version();
  if (is_output) {
    weak_grad_fn_ = t.grad_fn();
    output_nr_ = t.output_nr();
  } else if (t.grad_fn()) {
    grad_fn_ = t.grad_fn();
    output_nr_ = t.output_nr();
  } else if (t.requires_grad()) {
    leaf_ = t;
  }
}

Tensor SavedTensor::unpack(const std::string& op) const {
  TS_CHECK(!released_, op,
           "trying to backward through the graph a second time (its saved tensors were freed); pass "
           "retain_graph = true to the first backward if you need to");
  if (!data_.defined()) return Tensor();
  TS_CHECK(data_.version() == version_, op,
           "a tensor saved for backward was modified in place: it was saved at version ", version_,
           " and is now at version ", data_.version(), " (", data_.describe(), ")");
  if (leaf_.defined()) return leaf_;
  std::shared_ptr<Node> fn = grad_fn_ ? grad_fn_ : weak_grad_fn_.lock();
  if (!fn) return data_;
  Tensor t = data_.detach();
  t.set_history(std::move(fn), output_nr_);
  return t;
}

AccumulateGrad::AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {
  // Leaves run as soon as they are ready, so their hooks (gradient reduction) start early.
  sequence_nr = std::numeric_limits<uint64_t>::max();
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  TS_CHECK(g.shape() == leaf_.shape(), "AccumulateGrad", "expected a gradient of shape ",
           shape_str(leaf_.shape()), ", got ", shape_str(g.shape()));
  if (g.dtype() != leaf_.dtype()) g = to_dtype(g, leaf_.dtype());
  if (WeightGradQueue* queue = weight_grad_queue_joining(*this)) {
    // Part of this leaf's gradient waits in the queue (DeferWeightGrads): this part waits with it,
    // so the leaf gets its whole gradient, and its hooks fire, once, in WeightGradQueue::run.
    // The engine never modifies a gradient in place, so holding `g` until then is safe.
    queue->push(Edge{shared_from_this(), 0}, [g] { return g; });
    return {};
  }
  const bool create_graph = is_grad_enabled();
  Tensor old = leaf_.grad();
  if (!old.defined()) {
    // Own the memory: the incoming gradient may be shared with other nodes or be a broadcast view,
    // so it is copied unless nothing else holds it (then it is taken as it is, as PyTorch steals
    // it: on GPT-2 the copies were 11% of a CPU step). Under create_graph keep the graph (the
    // gradient is itself differentiable).
    leaf_.set_grad(create_graph || g.is_sole_owner() ? g : g.clone());
  } else if (create_graph) {
    leaf_.set_grad(add(old, g));
  } else {
    add_(old, g);
  }
  for (const GradReadyHook& hook : leaf_.grad_ready_hooks()) hook(leaf_);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return Edge{};
  if (t.grad_fn()) return Edge{t.grad_fn(), t.output_nr()};
  if (!t.requires_grad()) return Edge{};
  AutogradMeta& meta = t.impl()->autograd_meta();
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void set_history(const Tensor& out, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  if (!node) return;
  out.set_history(node, output_nr);
}

Tensor Node::grad_in_output_dtype(std::vector<Tensor>& grads, uint32_t output_nr) const {
  Tensor g = std::move(grads[output_nr]);
  const DType dtype = output_meta.at(output_nr).dtype;
  return g.dtype() == dtype ? g : to_dtype(g, dtype);
}

}  // namespace tessera::autograd
