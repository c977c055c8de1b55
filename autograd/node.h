// Graph nodes of reverse-mode autograd. Each differentiable op that saw an input requiring grad
// creates one Node holding what its backward needs; the node's next_edges point at the nodes that
// produced its inputs (or at AccumulateGrad for leaves). Writing an op:
//
//   struct MulBackward final : Node {
//     SavedTensor a, b;
//     std::string name() const override { return "MulBackward"; }
//     std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { ... one per input ... }
//     void release_saved() override { a.reset(); b.reset(); }
//   };
//   Tensor out = ...forward from kernels...;
//   if (auto node = make_node<MulBackward>({&a, &b})) { node->a = SavedTensor(a); ...;
//     set_history(out, node); }
//
// A node whose backward is a collective also overrides always_run() to return true and calls
// node->record_output(out) after set_history (see Node::always_run).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tessera::autograd {

class Node;

// Where a gradient goes: input `input_nr` of node `fn` (the output index it came from).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  virtual std::string name() const = 0;
  // grads[i]: gradient w.r.t. this node's output i (undefined when none flowed there).
  // Returns one gradient per next_edges entry (undefined where not needed).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Optional: adds what apply() would return into `sums` instead, and returns true; returns false,
  // touching nothing, to have the engine call apply(). sums[i] is the partial gradient already
  // waiting at next edge i when the engine may add into it (contiguous, nothing else holds it,
  // not under create_graph), else null. A gradient that is sparse in a dense input (an
  // embedding's looked-up rows) then costs no dense zeros and no dense add: a tied embedding's
  // table gradient is scattered straight into the LM head's.
  virtual bool apply_into(const std::vector<Tensor>& grads, const std::vector<Tensor*>& sums) {
    return false;
  }
  // Frees saved tensors once backward has used them (unless retain_graph).
  virtual void release_saved() {}
  // How many outputs the forward produced (grads.size() in apply).
  virtual uint32_t num_outputs() const { return 1; }
  // True for nodes whose backward is a collective (parallel/tensor's region ops): every rank of
  // the group must run it, even a rank where no gradient reached it, or its peers wait forever.
  // The engine then runs the node whenever it is reachable from the roots (under grad(): only when
  // it also lies on a path to a requested input, as for any node; every rank decides that alike),
  // and apply() sees a defined gradient for EVERY output: those that did not arrive are zeros
  // shaped like the outputs the forward recorded with record_output(). The zeros flow on, so the
  // leaves below get zero gradients (and their grad-ready hooks fire) on every rank alike.
  virtual bool always_run() const { return false; }

  bool needs_input_grad(size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }

  // Shape, dtype and device of one forward output: what a zero gradient for it looks like.
  struct OutputMeta {
    Shape shape;
    DType dtype = DType::f32;
    Device device{};
    bool recorded = false;
  };
  // An always_run() node calls this for each output after set_history (the engine refuses to run
  // such a node without a gradient for an output it cannot shape).
  void record_output(const Tensor& out, uint32_t output_nr = 0) {
    if (output_meta.size() <= output_nr) output_meta.resize(output_nr + 1);
    output_meta[output_nr] = OutputMeta{out.shape(), out.dtype(), out.device(), true};
  }

  // The gradient for output `output_nr` (taken from grads), in the dtype that output had: a
  // collective backward must send every rank's gradient in one dtype, whatever the layers below
  // accumulated in.
  Tensor grad_in_output_dtype(std::vector<Tensor>& grads, uint32_t output_nr = 0) const;

  std::vector<Edge> next_edges;  // one per differentiable input, in the forward's order
  uint64_t sequence_nr;          // creation order: later nodes run first among ready ones
  // Filled by record_output (indexed by output_nr); empty for nodes that do not always run.
  std::vector<OutputMeta> output_meta;
};

// A tensor kept for backward, with the version it had when saved: unpacking it after an in-place
// change throws "[op] a tensor saved for backward was modified in place".
// Unpacking gives the saved data with its autograd identity (a leaf unpacks as itself, a non-leaf
// with its grad_fn), so backward formulas built from ops record a graph under create_graph.
// Save a node's own OUTPUT with is_output = true, after set_history: it then refers to its node
// weakly (no reference cycle node -> output -> node).
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t, bool is_output = false);
  // The saved tensor; throws if it was modified in place or already freed.
  Tensor unpack(const std::string& op) const;
  void reset() {
    data_ = Tensor();
    leaf_ = Tensor();
    grad_fn_.reset();
    weak_grad_fn_.reset();
    released_ = true;
  }
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;                        // detached handle on the saved storage
  Tensor leaf_;                        // the tensor itself when it is a leaf requiring grad
  std::shared_ptr<Node> grad_fn_;      // history of a saved input
  std::weak_ptr<Node> weak_grad_fn_;   // history of a saved output
  uint32_t output_nr_ = 0;
  uint64_t version_ = 0;
  bool released_ = false;
};

// The gradient sink of a leaf tensor: accumulates into leaf.grad() and fires its grad-ready hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// The edge a gradient for `t` should follow: its grad_fn, its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
// True when grad mode is on and any defined input requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Creates a node of type N wired to `inputs` when any_requires_grad(inputs); else returns null.
template <typename N, typename... Args>
std::shared_ptr<N> make_node(std::initializer_list<const Tensor*> inputs, Args&&... args) {
  if (!any_requires_grad(inputs)) return nullptr;
  auto node = std::make_shared<N>(std::forward<Args>(args)...);
  for (const Tensor* t : inputs) node->next_edges.push_back(t && t->defined() ? gradient_edge(*t) : Edge{});
  return node;
}
template <typename N, typename... Args>
std::shared_ptr<N> make_node_v(const std::vector<Tensor>& inputs, Args&&... args) {
  if (!any_requires_grad(inputs)) return nullptr;
  auto node = std::make_shared<N>(std::forward<Args>(args)...);
  for (const Tensor& t : inputs) node->next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  return node;
}

// Makes `out` output `output_nr` of `node` (no-op when node is null).
void set_history(const Tensor& out, const std::shared_ptr<Node>& node, uint32_t output_nr = 0);

}  // namespace tessera::autograd
