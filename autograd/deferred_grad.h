// Deferred weight gradients, for zero-bubble pipeline schedules: inside a DeferWeightGrads scope a
// backward computes only what is on the critical path (input gradients, "B") and queues the weight
// gradients ("W") to run later, when the schedule has a bubble to fill.
//
//   autograd::WeightGradQueue queue;
//   {
//     autograd::DeferWeightGrads defer(queue);
//     autograd::backward({loss});  // B: x.grad() is there, the weights' .grad() not yet
//   }
//   ... send x.grad() upstream ...
//   queue.run();                   // W: the weights' .grad() accumulate, their hooks fire
//
// Deferred: linear's weight and bias and matmul's right operand, when that gradient goes straight
// into a leaf (its AccumulateGrad). Everything else is computed in B as usual: a weight reached
// through another op (a cast, a view), backward under create_graph, autograd::grad(), and the
// recomputation inside checkpoint() (its inputs' gradients are read right after it).
// A leaf with deferred work gets ALL of its gradient in W: if another op's gradient also reaches it
// in that backward, it is queued too, so .grad() and the grad-ready hooks see one complete
// gradient, once, as in a plain backward. (Not covered: a leaf that a checkpointed region also
// uses; it gets that part in B and the rest in W, so its hooks fire twice.)
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include "autograd/node.h"
#include "core/tensor.h"

namespace tessera::autograd {

// Weight-gradient work queued by the backward runs made inside a DeferWeightGrads scope. One queue
// per micro-batch is the usual use; a queue may also collect several backwards. It holds each
// piece's saved activation and output gradient until run(); destroying it unrun drops the work.
class WeightGradQueue {
 public:
  WeightGradQueue() = default;
  WeightGradQueue(const WeightGradQueue&) = delete;
  WeightGradQueue& operator=(const WeightGradQueue&) = delete;

  bool empty() const { return pieces_.empty(); }
  size_t size() const { return pieces_.size(); }

  // Computes every queued piece in order, sums the pieces of each leaf in that order (as the engine
  // sums the gradients reaching one input) and hands each sum to the leaf's AccumulateGrad as soon
  // as its last piece is done: .grad() accumulates and the grad-ready hooks fire once per leaf per
  // run(), early leaves first. Empties the queue, also when a piece throws (e.g. a saved tensor
  // was modified in place since B); the leaves not reached by then keep their old .grad().
  void run();

  // For backward nodes: queues `compute`, which returns the gradient for `edge` (an edge into an
  // AccumulateGrad). It runs in run() under no_grad and must own what it reads.
  void push(const Edge& edge, std::function<Tensor()> compute);
  // True when work for this accumulator is queued (AccumulateGrad then defers what reaches it).
  bool has_pending(const Node* accumulator) const { return pending_.count(accumulator) > 0; }

 private:
  struct Piece {
    std::shared_ptr<Node> accumulator;
    std::function<Tensor()> compute;
  };
  std::vector<Piece> pieces_;
  std::unordered_set<const Node*> pending_;
};

// While alive on this thread, backward queues its deferrable weight-gradient work onto `queue`.
// Scopes nest; the innermost wins. The queue must outlive the scope.
class DeferWeightGrads {
 public:
  explicit DeferWeightGrads(WeightGradQueue& queue);
  ~DeferWeightGrads();
  DeferWeightGrads(const DeferWeightGrads&) = delete;
  DeferWeightGrads& operator=(const DeferWeightGrads&) = delete;

 private:
  WeightGradQueue* previous_;
};

// Turns deferral off in a scope: for grad() (it returns gradients instead of accumulating them),
// checkpoint's inner backward and WeightGradQueue::run itself.
class NoWeightGradDeferral {
 public:
  NoWeightGradDeferral();
  ~NoWeightGradDeferral();
  NoWeightGradDeferral(const NoWeightGradDeferral&) = delete;
  NoWeightGradDeferral& operator=(const NoWeightGradDeferral&) = delete;

 private:
  WeightGradQueue* previous_;
};

// The queue that should take the gradient of `node`'s input `input`, or null when it must be
// computed now: no scope, grad mode on (create_graph records the backward), or the edge does not
// lead straight to a leaf's AccumulateGrad.
WeightGradQueue* weight_grad_queue_for(const Node& node, size_t input);
// For AccumulateGrad: the queue that should also take a gradient reaching `accumulator` directly,
// because deferred work for the same leaf is queued there; null when none (or grad mode is on).
WeightGradQueue* weight_grad_queue_joining(const Node& accumulator);

}  // namespace tessera::autograd
