// Deferred weight gradients: the per-thread active queue, and running the queued work into the
// leaves' accumulators the way the engine would have.
#include "autograd/deferred_grad.h"

#include <unordered_map>
#include <utility>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace tessera::autograd {
namespace {
// Per thread, like grad mode: a backward runs on the thread that started it.
thread_local WeightGradQueue* g_active_queue = nullptr;
}  // namespace

void WeightGradQueue::push(const Edge& edge, std::function<Tensor()> compute) {
  TS_ASSERT(edge.valid() && dynamic_cast<const AccumulateGrad*>(edge.fn.get()) != nullptr);
  pending_.insert(edge.fn.get());
  pieces_.push_back(Piece{edge.fn, std::move(compute)});
}

void WeightGradQueue::run() {
  // Taken out first: a piece that throws leaves an empty queue rather than half-run work that a
  // second run() would accumulate twice.
  std::vector<Piece> pieces = std::move(pieces_);
  pieces_.clear();
  pending_.clear();
  // Accumulating must not be queued again (run() may be called inside another queue's scope), and
  // W records no graph, like a backward without create_graph.
  NoWeightGradDeferral no_deferral;
  NoGradGuard no_grad;

  std::unordered_map<const Node*, size_t> last_piece;
  for (size_t i = 0; i < pieces.size(); ++i) last_piece[pieces[i].accumulator.get()] = i;
  std::unordered_map<const Node*, Tensor> sums;
  for (size_t i = 0; i < pieces.size(); ++i) {
    Node* acc = pieces[i].accumulator.get();
    Tensor g = pieces[i].compute();
    pieces[i].compute = nullptr;  // frees the saved activations and gradient now
    if (g.defined()) {
      Tensor& sum = sums[acc];
      sum = sum.defined() ? add(sum, g) : std::move(g);
    }
    // The leaf's last piece: its gradient is complete, so accumulate now and let its hooks (a
    // data-parallel bucket's reduction) start while the remaining pieces compute.
    if (last_piece.at(acc) != i) continue;
    auto it = sums.find(acc);
    if (it == sums.end()) continue;
    std::vector<Tensor> grads{std::move(it->second)};
    sums.erase(it);
    acc->apply(std::move(grads));
  }
}

DeferWeightGrads::DeferWeightGrads(WeightGradQueue& queue) : previous_(g_active_queue) {
  g_active_queue = &queue;
}
DeferWeightGrads::~DeferWeightGrads() { g_active_queue = previous_; }

NoWeightGradDeferral::NoWeightGradDeferral() : previous_(g_active_queue) {
  g_active_queue = nullptr;
}
NoWeightGradDeferral::~NoWeightGradDeferral() { g_active_queue = previous_; }

WeightGradQueue* weight_grad_queue_for(const Node& node, size_t input) {
  // Grad mode is on inside a backward only under create_graph: the weight gradient must then be
  // recorded now, as part of the graph being built.
  if (!g_active_queue || is_grad_enabled() || !node.needs_input_grad(input)) return nullptr;
  // Only a leaf's sink can wait: any other node would run in this backward without the gradient.
  const Node* next = node.next_edges[input].fn.get();
  return dynamic_cast<const AccumulateGrad*>(next) ? g_active_queue : nullptr;
}

WeightGradQueue* weight_grad_queue_joining(const Node& accumulator) {
  if (!g_active_queue || is_grad_enabled()) return nullptr;
  return g_active_queue->has_pending(&accumulator) ? g_active_queue : nullptr;
}

}  // namespace tessera::autograd
