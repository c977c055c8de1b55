// Activation checkpointing: the forward runs without recording a graph; backward re-runs fn on the
// saved inputs with grad on (default generator rewound so random ops replay) and backpropagates
// through that recomputed graph, which also accumulates into parameters fn uses.
#include "autograd/deferred_grad.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace tessera {
namespace {

using autograd::Node;
using autograd::SavedTensor;
using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Sets the default generator's state for a scope and puts the previous one back.
class GeneratorStateGuard {
 public:
  GeneratorStateGuard(uint64_t seed, uint64_t offset)
      : seed_(default_generator().seed()), offset_(default_generator().offset()) {
    default_generator().set_state(seed, offset);
  }
  ~GeneratorStateGuard() { default_generator().set_state(seed_, offset_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

 private:
  uint64_t seed_, offset_;
};

struct CheckpointBackward final : Node {
  CheckpointFn fn;
  std::vector<SavedTensor> inputs;
  std::vector<bool> input_requires_grad;
  uint64_t seed = 0, offset = 0;
  uint32_t outputs = 0;

  std::string name() const override { return "CheckpointBackward"; }
  uint32_t num_outputs() const override { return outputs; }
  void release_saved() override {
    for (SavedTensor& s : inputs) s.reset();
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const bool create_graph = autograd::is_grad_enabled();
    std::vector<Tensor> detached;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor t = inputs[i].unpack("checkpoint");
      if (t.defined()) {
        t = t.detach();
        if (input_requires_grad[i]) t.set_requires_grad(true);
      }
      detached.push_back(t);
    }
    std::vector<Tensor> recomputed;
    {
      GeneratorStateGuard rng(seed, offset);
      autograd::EnableGradGuard grad_on;
      recomputed = fn(detached);
    }
    TS_CHECK(recomputed.size() == outputs, "checkpoint", "expected the recomputation to give ", outputs,
             " outputs like the forward, got ", recomputed.size());
    std::vector<Tensor> roots, root_grads;
    for (size_t i = 0; i < recomputed.size(); ++i) {
      if (!grads[i].defined() || !recomputed[i].requires_grad()) continue;
      roots.push_back(recomputed[i]);
      root_grads.push_back(grads[i]);
    }
    if (!roots.empty()) {
      // The inputs' gradients are read from `detached` just below: none may be deferred.
      autograd::NoWeightGradDeferral no_deferral;
      autograd::backward(roots, root_grads, {.retain_graph = false, .create_graph = create_graph});
    }
    std::vector<Tensor> out(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      if (needs_input_grad(i) && detached[i].defined()) out[i] = detached[i].grad();
    return out;
  }
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  TS_CHECK(static_cast<bool>(fn), "checkpoint", "expected a function to run, got an empty one");
  const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  std::vector<Tensor> outs;
  {
    autograd::NoGradGuard no_grad;
    outs = fn(inputs);
  }
  // Recorded whenever grad mode is on, even if no input requires grad: fn may use parameters that do.
  if (!autograd::is_grad_enabled()) return outs;
  auto node = std::make_shared<CheckpointBackward>();
  node->fn = fn;
  node->seed = seed;
  node->offset = offset;
  node->outputs = uint32_t(outs.size());
  for (const Tensor& t : inputs) {
    node->next_edges.push_back(autograd::gradient_edge(t));
    node->inputs.emplace_back(t);
    node->input_requires_grad.push_back(t.defined() && t.requires_grad());
  }
  for (uint32_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined() || !is_floating(outs[i].dtype())) continue;
    outs[i] = outs[i].detach();  // a fresh handle: fn may have returned an input itself
    autograd::set_history(outs[i], node, i);
  }
  return outs;
}

}  // namespace tessera
