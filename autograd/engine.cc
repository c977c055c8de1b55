// The backward engine: dependency counting over the graph reachable from the roots, then a ready
// queue that runs the most recently created node first, summing gradients per node input. A node
// no gradient reached is skipped, unless it always runs (a collective; zeros stand in for the
// missing gradients).
#include "autograd/engine.h"

#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/deferred_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "core/profiler.h"

namespace tessera::autograd {
namespace {

struct NodeState {
  int64_t dependencies = 0;
  std::vector<Tensor> grads;  // summed gradient per node output
};

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// What grad() asks for: the summed gradient arriving at (node, output_nr) for each input.
struct Capture {
  std::shared_ptr<Node> node;  // owned: a leaf's accumulator may exist only here
  uint32_t output_nr;
  size_t input_index;
};

class GraphTask {
 public:
  GraphTask(const BackwardOptions& opts, bool accumulate) : opts_(opts), accumulate_(accumulate) {}

  // Counts, for every node reachable from the roots, how many edges lead into it.
  void discover(const std::vector<Edge>& roots) {
    std::vector<Node*> stack;
    for (const Edge& e : roots) {
      if (!e.valid()) continue;
      if (states_.emplace(e.fn.get(), NodeState{}).second) stack.push_back(e.fn.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        auto [it, inserted] = states_.emplace(e.fn.get(), NodeState{});
        ++it->second.dependencies;
        if (inserted) stack.push_back(e.fn.get());
      }
    }
  }

  // grad(): a node runs only when one of its edges leads to a captured input.
  void restrict_to(const std::vector<Capture>& captures) {
    for (const Capture& c : captures) captures_by_node_[c.node.get()].push_back(c);
    std::unordered_map<Node*, bool> reaches;
    for (auto& entry : states_) {
      bool run = false;
      for (const Edge& e : entry.first->next_edges)
        if (e.valid() && reaches_capture(e.fn.get(), reaches)) run = true;
      runs_[entry.first] = run;
    }
    restricted_ = true;
  }

  // Offers node the partial sums waiting at its next edges to add into (Node::apply_into).
  bool try_apply_into(Node& node, const std::vector<Tensor>& grads) {
    if (opts_.create_graph) return false;
    std::vector<Tensor*> sums(node.next_edges.size(), nullptr);
    bool any = false;
    for (size_t i = 0; i < sums.size(); ++i) {
      const Edge& e = node.next_edges[i];
      if (!e.valid()) continue;
      NodeState& s = states_.at(e.fn.get());
      if (e.input_nr >= s.grads.size()) continue;
      Tensor& slot = s.grads[e.input_nr];
      if (slot.defined() && slot.is_sole_owner()) {
        sums[i] = &slot;
        any = true;
      }
    }
    return any && node.apply_into(grads, sums);
  }

  void add_grad(const Edge& e, Tensor g) {
    if (!e.valid() || !g.defined()) return;
    NodeState& s = states_.at(e.fn.get());
    if (s.grads.size() < e.fn->num_outputs()) s.grads.resize(e.fn->num_outputs());
    TS_ASSERT(e.input_nr < s.grads.size());
    Tensor& slot = s.grads[e.input_nr];
    if (!slot.defined()) {
      slot = std::move(g);
    } else if (!opts_.create_graph && slot.is_sole_owner() && slot.shape() == g.shape() &&
               slot.dtype() == g.dtype() && slot.device() == g.device()) {
      // Nothing else sees the partial sum (no other handle, no view): add into it rather than
      // allocate a new sum, which for a tied embedding is a (vocab, C) tensor per backward and for
      // every residual branch an activation-sized one.
      add_(slot, g);
    } else {
      slot = add(slot, g);
    }
  }

  void run(const std::vector<Edge>& roots, std::vector<Tensor>* captured) {
    std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
    std::unordered_set<Node*> queued;
    for (const Edge& e : roots) {
      if (e.valid() && states_.at(e.fn.get()).dependencies == 0 && queued.insert(e.fn.get()).second)
        ready.push(e.fn.get());
    }
    GradModeGuard mode(opts_.create_graph);
    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      NodeState& state = states_.at(node);
      std::vector<Tensor> grads = std::move(state.grads);
      grads.resize(node->num_outputs());
      if (captured) {
        auto it = captures_by_node_.find(node);
        if (it != captures_by_node_.end())
          for (const Capture& c : it->second) (*captured)[c.input_index] = grads[c.output_nr];
      }
      std::vector<Tensor> out;
      if (should_run(node, grads)) {
        if (node->always_run()) fill_missing_grads(*node, grads);
        std::string profiled;  // the node's name, kept while its scope times it
        std::optional<profiler::Scope> scope;
        if (profiler::enabled()) scope.emplace((profiled = node->name()).c_str(), "backward");
        if (!try_apply_into(*node, grads)) out = node->apply(std::move(grads));
        scope.reset();
        // create_graph keeps the graph too (PyTorch's default): the new graph refers to it.
        if (!opts_.retain_graph && !opts_.create_graph) node->release_saved();
        TS_ASSERT(out.empty() || out.size() == node->next_edges.size());
      }
      for (size_t i = 0; i < node->next_edges.size(); ++i) {
        const Edge& e = node->next_edges[i];
        if (!e.valid()) continue;
        if (i < out.size()) add_grad(e, std::move(out[i]));
        NodeState& next = states_.at(e.fn.get());
        if (--next.dependencies == 0) ready.push(e.fn.get());
      }
    }
  }

 private:
  bool reaches_capture(Node* n, std::unordered_map<Node*, bool>& memo) {
    auto it = memo.find(n);
    if (it != memo.end()) return it->second;
    bool r = captures_by_node_.count(n) > 0;
    for (const Edge& e : n->next_edges)
      if (!r && e.valid()) r = reaches_capture(e.fn.get(), memo);
    memo[n] = r;
    return r;
  }

  // A node runs when a gradient reached one of its outputs, or always when it is a collective
  // (Node::always_run): a rank that skipped it would leave its group waiting. Under grad() only
  // nodes on a path to a requested input run, always_run or not.
  bool should_run(Node* node, const std::vector<Tensor>& grads) const {
    if (!accumulate_ && dynamic_cast<AccumulateGrad*>(node)) return false;
    if (restricted_ && !runs_.at(node)) return false;
    if (node->always_run()) return true;
    for (const Tensor& g : grads)
      if (g.defined()) return true;
    return false;
  }

  // Zeros, shaped like the recorded outputs, for the gradients that did not reach an always_run
  // node, so its collective runs with the right sizes on every rank.
  static void fill_missing_grads(const Node& node, std::vector<Tensor>& grads) {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) continue;
      if (i >= node.output_meta.size() || !node.output_meta[i].recorded) {
        throw InternalError("backward",
                            str_cat(node.name(), " always runs, but the shape of its output ", i,
                                    " was not recorded (call Node::record_output)"));
      }
      const Node::OutputMeta& m = node.output_meta[i];
      grads[i] = zeros(m.shape, {.dtype = m.dtype, .device = m.device});
    }
  }

  BackwardOptions opts_;
  bool accumulate_;
  bool restricted_ = false;
  std::unordered_map<Node*, NodeState> states_;
  std::unordered_map<Node*, std::vector<Capture>> captures_by_node_;
  std::unordered_map<Node*, bool> runs_;
};

// Root edges and their starting gradients, validated.
std::vector<Tensor> root_grads(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  TS_CHECK(!roots.empty(), op, "expected at least one root tensor, got none");
  TS_CHECK(grads.empty() || grads.size() == roots.size(), op, "expected ", roots.size(),
           " gradients (one per root), got ", grads.size());
  std::vector<Tensor> out(roots.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    TS_CHECK(r.defined(), op, "expected root ", i, " to be a defined tensor, got an undefined one");
    TS_CHECK(r.requires_grad(), op, "expected root ", i,
             " to require grad, got a tensor without history (", r.describe(),
             "); was it computed under no_grad or from tensors that do not require grad?");
    const Tensor& g = i < grads.size() ? grads[i] : Tensor();
    if (g.defined()) {
      TS_CHECK(g.shape() == r.shape(), op, "expected the gradient of root ", i, " to have shape ",
               shape_str(r.shape()), ", got ", shape_str(g.shape()));
      TS_CHECK(g.device() == r.device(), op, "expected the gradient of root ", i, " on ", r.device().str(),
               ", got ", g.device().str());
      out[i] = g;
    } else {
      TS_CHECK(r.numel() == 1, op, "expected a gradient for non-scalar root ", i, " of shape ",
               shape_str(r.shape()), " (only one-element roots default to ones)");
      out[i] = ones(r.shape(), {.dtype = r.dtype(), .device = r.device()});
    }
  }
  return out;
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, const BackwardOptions& opts) {
  std::vector<Tensor> start = root_grads("backward", roots, grads);
  std::vector<Edge> edges;
  for (const Tensor& r : roots) edges.push_back(gradient_edge(r));
  GraphTask task(opts, /*accumulate=*/true);
  task.discover(edges);
  for (size_t i = 0; i < edges.size(); ++i) task.add_grad(edges[i], start[i]);
  task.run(edges, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grads, const BackwardOptions& opts) {
  std::vector<Tensor> start = root_grads("grad", roots, grads);
  std::vector<Capture> captures;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TS_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad", "expected input ", i,
             " to require grad, got ", inputs[i].describe());
    Edge e = gradient_edge(inputs[i]);
    captures.push_back(Capture{e.fn, e.input_nr, i});
  }
  std::vector<Edge> edges;
  for (const Tensor& r : roots) edges.push_back(gradient_edge(r));
  // grad() returns the gradients it captures: a deferred one would be missing from the result.
  NoWeightGradDeferral no_deferral;
  GraphTask task(opts, /*accumulate=*/false);
  task.discover(edges);
  task.restrict_to(captures);
  for (size_t i = 0; i < edges.size(); ++i) task.add_grad(edges[i], start[i]);
  std::vector<Tensor> result(inputs.size());
  task.run(edges, &result);
  return result;
}

}  // namespace tessera::autograd
