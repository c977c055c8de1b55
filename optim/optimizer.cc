// Optimizer base: the step loop, state creation and the checkpoint form of the state.
#include "optim/optimizer.h"

#include <set>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "optim/state_key.h"

namespace tessera::optim {

using nlohmann::json;

namespace {

bool no_decay_name(const std::string& name) {
  if (name.find("bias") != std::string::npos || name.find("norm") != std::string::npos) return true;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    if (name.compare(start, 2, "ln") == 0) return true;
    start = dot + 1;
  }
  return false;
}

}  // namespace

std::vector<ParamGroup> param_groups_with_decay(const NamedTensors& named_params, double weight_decay) {
  ParamGroup decay{.params = {}, .lr = std::nullopt, .weight_decay = weight_decay};
  ParamGroup no_decay{.params = {}, .lr = std::nullopt, .weight_decay = 0.0};
  for (const auto& [name, t] : named_params) {
    TS_CHECK(t.defined(), "param_groups_with_decay", "expected a defined tensor for '", name, "'");
    (decays_weight(name, t.dim()) ? decay : no_decay).params.push_back(t);
  }
  return {decay, no_decay};
}

bool decays_weight(const std::string& name, int64_t dims) { return dims > 1 && !no_decay_name(name); }

const Tensor& Optimizer::ParamState::get(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  TS_FAIL("optimizer", "expected state tensor '", name, "', got none");
}

Optimizer::Optimizer(const std::vector<ParamGroup>& groups) {
  std::set<const TensorImpl*> seen;
  size_t begin = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      const Tensor& p = groups[g].params[i];
      TS_CHECK(p.defined() && is_floating(p.dtype()), "optimizer", "expected floating parameters, got ",
               p.defined() ? p.describe() : "undefined", " at group ", g, " index ", i);
      TS_CHECK(seen.insert(p.impl()).second, "optimizer",
               "expected each parameter in one group only, got a repeat at group ", g, " index ", i);
    }
    groups_.push_back(groups[g].params);
    group_begin_.push_back(begin);
    begin += groups[g].params.size();
  }
  state_.resize(begin);
}

const std::vector<Tensor>& Optimizer::group_params(size_t group) const {
  TS_CHECK(group < groups_.size(), "optimizer", "expected a group index below ", groups_.size(), ", got ",
           group);
  return groups_[group];
}

std::vector<Tensor> Optimizer::params() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.begin(), g.end());
  return out;
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

int64_t Optimizer::step_count(size_t index) const {
  TS_CHECK(index < state_.size(), "optimizer", "expected a parameter index below ", state_.size(), ", got ",
           index);
  return state_[index].step;
}

void Optimizer::step() {
  autograd::NoGradGuard no_grad;
  std::vector<PendingUpdate> pending;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<std::string> names = state_names(g);
    pending.clear();
    for (size_t i = 0; i < groups_[g].size(); ++i) {
      const Tensor& p = groups_[g][i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      TS_CHECK(grad.shape() == p.shape() && is_floating(grad.dtype()) && grad.device() == p.device(),
               type(), "expected a floating gradient like the parameter ", p.describe(), ", got ",
               grad.describe(), " at group ", g, " index ", i);
      ParamState& st = state_[group_begin_[g] + i];
      create_state(st, p, names);
      ++st.step;
      pending.push_back({p, grad.contiguous(), &st});
    }
    update_group(g, pending);
  }
}

size_t Optimizer::group_of(size_t index) const {
  TS_CHECK(index < state_.size(), type(), "expected a parameter index below ", state_.size(),
           ", got ", index);
  size_t g = 0;
  while (g + 1 < groups_.size() && index >= group_begin_[g + 1]) ++g;
  return g;
}

void Optimizer::create_state(ParamState& state, const Tensor& p,
                             const std::vector<std::string>& names) {
  if (!state.tensors.empty()) return;
  for (const std::string& n : names)
    state.tensors.emplace_back(n, zeros(p.shape(), {.dtype = DType::f32, .device = p.device()}));
}

void Optimizer::begin_sliced_step(size_t index) {
  TS_CHECK(elementwise(), type(), "expected an element-wise optimizer for a sliced step");
  const size_t g = group_of(index);
  const Tensor& p = groups_[g][index - group_begin_[g]];
  TS_CHECK(p.dim() == 1, type(), "expected a 1-D parameter for a sliced step, got ", p.describe());
  create_state(state_[index], p, state_names(g));
  ++state_[index].step;
}

void Optimizer::step_slice(size_t index, int64_t offset, const Tensor& grad) {
  autograd::NoGradGuard no_grad;  // thread-local: the caller's thread only
  const size_t g = group_of(index);
  const Tensor& p = groups_[g][index - group_begin_[g]];
  const int64_t n = grad.numel();
  TS_CHECK(p.dim() == 1 && offset >= 0 && offset + n <= p.numel(), type(),
           "expected a slice of the 1-D parameter ", p.describe(), ", got offset ", offset,
           " and ", n, " elements");
  const ParamState& st = state_[index];
  TS_CHECK(st.step > 0 && !st.tensors.empty(), type(),
           "expected begin_sliced_step() before step_slice()");
  ParamState slice{.step = st.step, .tensors = {}};
  for (const auto& [name, t] : st.tensors) slice.tensors.emplace_back(name, t.narrow(0, offset, n));
  update(g, p.narrow(0, offset, n), grad.contiguous().reshape({n}), slice);
}

void Optimizer::update_group(size_t group, std::span<const PendingUpdate> pending) {
  for (const PendingUpdate& u : pending) update(group, u.param, u.grad, *u.state);
}

void Optimizer::zero_grad() {
  for (const auto& g : groups_)
    for (const Tensor& p : g) p.set_grad(Tensor());
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  out.meta["type"] = type();
  json groups = json::array();
  for (size_t g = 0; g < groups_.size(); ++g) {
    json j = group_options_json(g);
    json indices = json::array();
    for (size_t i = 0; i < groups_[g].size(); ++i) indices.push_back(group_begin_[g] + i);
    j["params"] = indices;
    groups.push_back(j);
  }
  out.meta["param_groups"] = groups;
  json state = json::object();
  for (size_t k = 0; k < state_.size(); ++k) {
    if (state_[k].step == 0) continue;
    state[std::to_string(k)] = {{"step", state_[k].step}};
    for (const auto& [name, t] : state_[k].tensors) out.tensors.emplace_back(state_key(k, name), t);
  }
  out.meta["state"] = state;
  return out;
}

std::vector<Optimizer::ParamState> Optimizer::load_param_state(const OptimizerState& sd) const {
  const char* op = "load_state_dict";
  const json& state = sd.meta.at("state");
  std::vector<ParamState> fresh(state_.size());
  TS_CHECK(state.is_object(), op, "expected 'state' as an object, got ", state.dump());
  std::set<std::string> used;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].size(); ++i) {
      const size_t k = group_begin_[g] + i;
      const std::string key = std::to_string(k);
      if (!state.contains(key)) continue;
      const json& e = state.at(key);
      TS_CHECK(e.is_object() && e.size() == 1 && e.contains("step") && e["step"].is_number_integer() &&
                   e["step"].get<int64_t>() > 0,
               op, "expected state.", key, " as {\"step\": n > 0}, got ", e.dump());
      fresh[k].step = e["step"].get<int64_t>();
      // The state's dtype and shape follow the parameter; the names follow the loaded options.
      const Tensor& p = groups_[g][i];
      for (const std::string& n : state_names(g)) {
        const std::string full = state_key(k, n);
        const Tensor* found = nullptr;
        for (const auto& [name, t] : sd.tensors)
          if (name == full) found = &t;
        TS_CHECK(found != nullptr && found->defined(), op, "expected tensor '", full, "', got none");
        TS_CHECK(found->shape() == p.shape() && found->dtype() == DType::f32, op, "expected '", full,
                 "' of shape ", shape_str(p.shape()), " f32, got ", found->describe());
        Tensor copy = zeros(p.shape(), {.dtype = DType::f32, .device = p.device()});
        copy.copy_(*found);
        fresh[k].tensors.emplace_back(n, copy);
        used.insert(full);
      }
    }
  }
  for (const auto& item : state.items()) {
    bool known = false;
    for (size_t k = 0; k < state_.size(); ++k) known |= item.key() == std::to_string(k);
    TS_CHECK(known, op, "expected state entries for parameters 0..", int64_t(state_.size()) - 1,
             ", got entry '", item.key(), "'");
  }
  for (const auto& [name, t] : sd.tensors)
    TS_CHECK(used.count(name) == 1, op, "expected only the state tensors of ", type(),
             ", got unexpected tensor '", name, "'");
  return fresh;
}

void Optimizer::load_state_dict(const OptimizerState& sd) {
  const char* op = "load_state_dict";
  const json& m = sd.meta;
  TS_CHECK(m.is_object() && m.contains("type") && m.contains("param_groups") && m.contains("state"), op,
           "expected meta with 'type', 'param_groups' and 'state', got ", m.dump());
  TS_CHECK(m.at("type") == type(), op, "expected optimizer type '", type(), "', got ", m.at("type").dump());
  const json& groups = m.at("param_groups");
  TS_CHECK(groups.is_array() && groups.size() == groups_.size(), op, "expected ", groups_.size(),
           " param_groups, got ", groups.is_array() ? std::to_string(groups.size()) : groups.dump());
  // Validate everything before changing anything, so a failed load leaves the optimizer intact.
  std::vector<json> options;
  for (size_t g = 0; g < groups_.size(); ++g) {
    json j = groups[g];
    TS_CHECK(j.is_object() && j.contains("params") && j["params"].is_array(), op,
             "expected param_groups[", g, "] with a 'params' list, got ", j.dump());
    json expected = json::array();
    for (size_t i = 0; i < groups_[g].size(); ++i) expected.push_back(group_begin_[g] + i);
    TS_CHECK(j["params"] == expected, op, "expected param_groups[", g, "].params ", expected.dump(),
             " (", groups_[g].size(), " parameters), got ", j["params"].dump());
    j.erase("params");
    options.push_back(j);
  }
  // The state layout follows the loaded options (an SGD saved without momentum has no buffers), so
  // load them first and put the previous ones back if anything below fails.
  std::vector<json> previous;
  for (size_t g = 0; g < groups_.size(); ++g) previous.push_back(group_options_json(g));
  std::vector<ParamState> fresh(state_.size());
  try {
    for (size_t g = 0; g < groups_.size(); ++g) {
      try {
        load_group_options_json(g, options[g]);
      } catch (const Error& e) {
        TS_FAIL(op, "expected valid options in param_groups[", g, "], got: ", e.what());
      }
    }
    fresh = load_param_state(sd);
  } catch (...) {
    for (size_t g = 0; g < groups_.size(); ++g) load_group_options_json(g, previous[g]);
    throw;
  }
  state_ = std::move(fresh);
}

}  // namespace tessera::optim
