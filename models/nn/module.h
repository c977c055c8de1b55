// Module: the base of every layer and model. It owns named parameters, buffers and child modules,
// and gives the recursive views over them (dotted names, train/eval, device and dtype moves, state
// dicts) that optimizers, checkpoints and the parallel engine build on.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "parallel/tensor/placement.h"

namespace tessera::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;

// What load_state_dict(strict = false) skipped.
struct LoadResult {
  std::vector<std::string> missing_keys;     // the module's keys absent from the entries
  std::vector<std::string> unexpected_keys;  // entries the module has no key for
};

// Weight tying: one Tensor (the same TensorImpl) may be registered as a parameter by several
// modules, e.g. a GPT's token embedding and its LM head. named_parameters(), parameters() and
// num_parameters() list a shared tensor once, under the first name met in registration order, so an
// optimizer updates it once and its gradient (accumulated from every use) is counted once.
// state_dict() lists it under every name, like PyTorch, so a checkpoint holds each name a loader
// may ask for; load_state_dict() expects every name in strict mode and writes the same storage
// once per name (the later entry wins if they differ).
class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The layer's kind for messages ("Linear", "Block", ...).
  virtual std::string type_name() const { return "Module"; }

  // Registration. Names are non-empty, without '.', unique among this module's parameters, buffers
  // and children. A parameter must be a floating leaf; it is set to require grad (unless told
  // otherwise) and returned, so a layer can keep the handle as its member.
  Tensor register_parameter(const std::string& name, const Tensor& t, bool requires_grad = true);
  // A tensor-parallel shard: `t` is this rank's piece of the serial parameter `placement`
  // describes (its shape must be placement.local_shape()).
  Tensor register_parameter(const std::string& name, const Tensor& t,
                            const parallel::tensor::Placement& placement);
  // A non-persistent buffer is moved by to() but left out of state_dict().
  Tensor register_buffer(const std::string& name, const Tensor& t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Recursive views, in registration order: this module's own entries first, then each child's
  // under "child_name." (so "h.0.attn.c_attn.weight"). Shared tensors appear once (first name).
  NamedTensors named_parameters() const;
  // Each of named_parameters()'s entries' placement (replicated with its own shape unless
  // registered as a shard), in the same order.
  std::vector<std::pair<std::string, parallel::tensor::Placement>> named_placements() const;
  // The placement of every state_dict() entry (buffers replicated), in state_dict()'s order.
  std::vector<std::pair<std::string, parallel::tensor::Placement>> state_placements() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  // Direct children only.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  int64_t num_parameters() const;

  // Recursive; dropout and attention dropout act only in training mode (the default).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer (and existing gradients) in place: each keeps its identity
  // (the same TensorImpl, so tied weights stay tied and handles held elsewhere see the move) and
  // stays a leaf that requires grad. to(DType) converts floating tensors only.
  void to(Device device);
  void to(DType dtype);

  // Parameters and persistent buffers under every name (shared tensors repeated). The tensors are
  // detached handles on the module's own storage: clone() them for a snapshot.
  StateDict state_dict() const;
  // Copies values into the module's tensors in place (identity kept, version bumped). Every present
  // entry must match its tensor's shape and dtype (checked for all before anything is written);
  // strict also requires exactly the module's key set. Throws ValueError naming the keys or the
  // tensor and both shapes/dtypes. Entries may live on another device.
  LoadResult load_state_dict(const StateDict& entries, bool strict = true);

  // Drops (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);

 private:
  struct Entry {
    std::string name;
    Tensor tensor;
    bool persistent = true;
    std::shared_ptr<const parallel::tensor::Placement> placement;  // null: the whole tensor
  };
  static parallel::tensor::Placement placement_of(const Entry& e);
  void check_new_name(const std::string& name, const char* what) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect_parameters(const std::string& prefix, NamedTensors& out,
                          std::unordered_set<const TensorImpl*>* seen) const;
  void collect_buffers(const std::string& prefix, NamedTensors& out,
                       std::unordered_set<const TensorImpl*>* seen, bool persistent_only) const;
  // Every distinct parameter and buffer of the tree (for in-place moves).
  std::vector<Tensor> all_tensors() const;

  std::vector<Entry> parameters_;
  std::vector<Entry> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace tessera::nn
