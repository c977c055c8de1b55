// The optimizer base: parameter groups, lazily created per-parameter state, step / zero_grad, and
// state_dict / load_state_dict for checkpoints. Concrete optimizers (sgd.h, adam.h, lamb.h, lars.h)
// supply the per-parameter update and their options.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tessera::optim {

// A list of parameters sharing hyper-parameters. lr and weight_decay, when set, override the
// optimizer's defaults for this group (the other options come from the optimizer's options).
struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr{};
  std::optional<double> weight_decay{};
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Two groups, GPT-2 / Megatron practice: group 0 decays with `weight_decay`, group 1 (weight_decay
// 0) holds tensors with at most one dimension (biases, norm gains) and tensors whose name contains
// "bias" or "norm" or has a dot-separated part starting with "ln" (ln_1.weight, ln_f.weight). Both
// groups are always returned (possibly empty) so the state layout does not depend on the model.
std::vector<ParamGroup> param_groups_with_decay(const NamedTensors& named_params, double weight_decay);
// The rule above: whether a parameter of this name and number of dims goes to the decaying group.
bool decays_weight(const std::string& name, int64_t dims);

// Everything an optimizer needs to resume bit for bit. meta holds the scalars:
//   {"type": "adamw", "param_groups": [{<options>, "params": [0, 1]}, ...],
//    "state": {"0": {"step": 3}, ...}}
// tensors holds each parameter's state as "state.<param index>.<name>" (for example
// "state.0.exp_avg"), parameter indices counting through the groups in order. The tensors share
// memory with the live state: write them out before the next step (or clone them).
struct OptimizerState {
  nlohmann::json meta;
  NamedTensors tensors;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter whose gradient is defined (others are skipped and keep their
  // step count), without recording autograd history.
  void step();
  // Sets every parameter's gradient to undefined (PyTorch's set_to_none).
  void zero_grad();

  // "sgd", "adam", "adamw", "lamb", "lars".
  virtual const char* type() const = 0;
  size_t num_groups() const { return groups_.size(); }
  const std::vector<Tensor>& group_params(size_t group) const;
  // Every parameter, group by group: the order of the state indices.
  std::vector<Tensor> params() const;
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  // The same learning rate for every group (what a schedule does each step).
  void set_lr(double lr);
  // Updates taken by parameter `index` (0 before its first step).
  int64_t step_count(size_t index) const;

  // An element-wise optimizer (sgd, adam, adamw: every element's update reads only that element)
  // can step a 1-D parameter in pieces, so an update may start while later gradients are still
  // being computed (ZeRO's overlapped offload step): begin_sliced_step(index) counts the step and
  // creates the state, then each step_slice(index, offset, grad) updates elements [offset, offset
  // + grad.numel()) from `grad`, their gradient, with the numbers step() would give them. Slices
  // of one step are disjoint; slices on disjoint ranges may run on different threads at once.
  virtual bool elementwise() const { return false; }
  void begin_sliced_step(size_t index);
  void step_slice(size_t index, int64_t offset, const Tensor& grad);

  OptimizerState state_dict() const;
  // Restores options and state saved by an optimizer of the same type over parameters of the same
  // shapes; values are copied. Mismatches (type, group or parameter counts, missing or extra state
  // tensors, shapes, dtypes, option keys) throw an error naming the entry.
  void load_state_dict(const OptimizerState& state);

 protected:
  struct ParamState {
    int64_t step = 0;
    NamedTensors tensors;  // f32, the parameter's shape, in the order of state_names()
    const Tensor& get(const std::string& name) const;
  };

  explicit Optimizer(const std::vector<ParamGroup>& groups);

  // Updates `param` (contiguous) in place from `grad` (contiguous, the parameter's shape, any
  // floating dtype). state.step is already incremented (1 on the first update) and state.tensors
  // exist, zero-initialised on the first update.
  virtual void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // A parameter of a step, ready for update(): its arguments.
  struct PendingUpdate {
    Tensor param, grad;  // grad contiguous, the parameter's shape
    ParamState* state;
  };
  // Updates one group's parameters that have gradients, in group order. The default calls update()
  // on each; optimizers with a multi-tensor kernel override it to update them together.
  virtual void update_group(size_t group, std::span<const PendingUpdate> pending);
  // The state tensors a parameter of `group` keeps (for example {"exp_avg", "exp_avg_sq"}).
  virtual std::vector<std::string> state_names(size_t group) const = 0;
  virtual nlohmann::json group_options_json(size_t group) const = 0;
  // Parses and validates options saved by group_options_json; unknown keys throw.
  virtual void load_group_options_json(size_t group, const nlohmann::json& options) = 0;

 private:
  // The per-parameter state in sd, checked against the parameters and the current options.
  std::vector<ParamState> load_param_state(const OptimizerState& sd) const;
  // The group of parameter `index` (checked against the parameter count).
  size_t group_of(size_t index) const;
  // Parameter p's state zero-initialised (names: state_names of its group) if it has none yet.
  static void create_state(ParamState& state, const Tensor& p,
                           const std::vector<std::string>& names);

  std::vector<std::vector<Tensor>> groups_;
  std::vector<size_t> group_begin_;  // index of each group's first parameter
  std::vector<ParamState> state_;    // one per parameter, flat over groups
};

// Shared by every optimizer: options per group, resolved from the defaults and each group's
// overrides, and their JSON form. Options is a struct with lr and weight_decay members, and these
// functions found by argument-dependent lookup: to_json(const Options&), options_from_json(const
// json&, Options*) and validate(const Options&).
template <typename Options>
class OptimizerWithOptions : public Optimizer {
 public:
  const Options& options(size_t group) const { return options_.at(group); }
  // Changes one group's options (validated).
  void set_options(size_t group, const Options& options) {
    validate(options);
    options_.at(group) = options;
  }
  double lr(size_t group = 0) const override { return options_.at(group).lr; }
  void set_lr(size_t group, double lr) override {
    Options o = options_.at(group);
    o.lr = lr;
    set_options(group, o);
  }
  using Optimizer::set_lr;

 protected:
  OptimizerWithOptions(const std::vector<ParamGroup>& groups, const Options& defaults) : Optimizer(groups) {
    for (const ParamGroup& g : groups) {
      Options o = defaults;
      if (g.lr) o.lr = *g.lr;
      if (g.weight_decay) o.weight_decay = *g.weight_decay;
      validate(o);
      options_.push_back(o);
    }
  }
  nlohmann::json group_options_json(size_t group) const override { return to_json(options_.at(group)); }
  void load_group_options_json(size_t group, const nlohmann::json& j) override {
    Options o{};
    options_from_json(j, &o);
    set_options(group, o);
  }

 private:
  std::vector<Options> options_;
};

}  // namespace tessera::optim
