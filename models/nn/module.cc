// Module registration, recursive traversal, in-place moves and state-dict loading (see module.h).
#include "models/nn/module.h"

#include <map>
#include <unordered_map>
#include <sstream>

#include "autograd/grad_mode.h"
#include "models/nn/parameter_sink.h"

namespace tessera::nn {

namespace {

constexpr const char* kLoad = "load_state_dict";

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

std::string shape_dtype(const Tensor& t) {
  return shape_str(t.shape()) + " " + dtype_name(t.dtype());
}

}  // namespace

void Module::check_new_name(const std::string& name, const char* what) const {
  TS_CHECK(!name.empty() && name.find('.') == std::string::npos, what,
           "expected a non-empty name without '.', got '", name, "'");
  bool taken = false;
  for (const Entry& e : parameters_) taken |= e.name == name;
  for (const Entry& e : buffers_) taken |= e.name == name;
  for (const auto& c : children_) taken |= c.first == name;
  TS_CHECK(!taken, what, "expected a new name in ", type_name(), ", got '", name,
           "' which is already registered");
}

Tensor Module::register_parameter(const std::string& name, const Tensor& t, bool requires_grad) {
  check_new_name(name, "register_parameter");
  TS_CHECK(
      t.defined() && is_floating(t.dtype()) && t.is_leaf(), "register_parameter",
      "expected a floating leaf tensor for '", name, "', got ",
      t.defined() ? t.describe() + (t.is_leaf() ? "" : " (not a leaf)") : std::string("undefined"));
  t.set_requires_grad(requires_grad);
  parameters_.push_back({name, t, true});
  if (ParameterSink* sink = current_parameter_sink()) sink->on_parameter(t);
  return t;
}

Tensor Module::register_parameter(const std::string& name, const Tensor& t,
                                  const parallel::tensor::Placement& placement) {
  TS_CHECK(t.defined() && t.shape() == placement.local_shape(), "register_parameter",
           "expected the shard '", name, "' of shape ", shape_str(placement.local_shape()), " (",
           placement.describe(), "), got ", t.defined() ? t.describe() : std::string("undefined"));
  register_parameter(name, t, true);
  parameters_.back().placement = std::make_shared<const parallel::tensor::Placement>(placement);
  return t;
}

parallel::tensor::Placement Module::placement_of(const Entry& e) {
  return e.placement ? *e.placement : parallel::tensor::replicated(e.tensor.shape());
}

Tensor Module::register_buffer(const std::string& name, const Tensor& t, bool persistent) {
  check_new_name(name, "register_buffer");
  TS_CHECK(t.defined(), "register_buffer", "expected a defined tensor for '", name, "'");
  buffers_.push_back({name, t, persistent});
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  TS_CHECK(module != nullptr, "register_module", "expected a module for '", name, "', got null");
  TS_CHECK(module.get() != this, "register_module", "expected a module other than itself for '",
           name, "'");
  children_.emplace_back(name, std::move(module));
}

void Module::collect_parameters(const std::string& prefix, NamedTensors& out,
                                std::unordered_set<const TensorImpl*>* seen) const {
  for (const Entry& e : parameters_) {
    if (seen && !seen->insert(e.tensor.impl()).second) continue;
    out.emplace_back(prefix + e.name, e.tensor);
  }
  for (const auto& [name, child] : children_)
    child->collect_parameters(prefix + name + ".", out, seen);
}

void Module::collect_buffers(const std::string& prefix, NamedTensors& out,
                             std::unordered_set<const TensorImpl*>* seen,
                             bool persistent_only) const {
  for (const Entry& e : buffers_) {
    if (persistent_only && !e.persistent) continue;
    if (seen && !seen->insert(e.tensor.impl()).second) continue;
    out.emplace_back(prefix + e.name, e.tensor);
  }
  for (const auto& [name, child] : children_)
    child->collect_buffers(prefix + name + ".", out, seen, persistent_only);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  collect_parameters("", out, &seen);
  return out;
}

namespace {
using NamedPlacements = std::vector<std::pair<std::string, parallel::tensor::Placement>>;
}  // namespace

NamedPlacements Module::named_placements() const {
  // A tensor registered by several modules (tied weights) has the placement any of them gave it.
  std::unordered_map<const TensorImpl*, parallel::tensor::Placement> sharded;
  struct Walker {
    static void walk(const Module& m, std::unordered_map<const TensorImpl*, parallel::tensor::Placement>& out) {
      for (const Entry& e : m.parameters_)
        if (e.placement) out.emplace(e.tensor.impl(), *e.placement);
      for (const auto& [name, child] : m.children_) walk(*child, out);
    }
  };
  Walker::walk(*this, sharded);
  NamedPlacements out;
  for (const auto& [name, t] : named_parameters()) {
    auto it = sharded.find(t.impl());
    out.emplace_back(name, it != sharded.end() ? it->second
                                               : parallel::tensor::replicated(t.shape()));
  }
  return out;
}

NamedPlacements Module::state_placements() const {
  // state_dict() hands out detached handles, so its entries are matched by storage.
  std::unordered_map<const Storage*, parallel::tensor::Placement> by_storage;
  const NamedPlacements params = named_placements();
  const NamedTensors named = named_parameters();
  for (size_t i = 0; i < named.size(); ++i)
    by_storage.emplace(named[i].second.storage().get(), params[i].second);
  NamedPlacements out;
  for (const auto& [name, t] : state_dict()) {
    auto it = by_storage.find(t.storage().get());
    out.emplace_back(name, it != by_storage.end() ? it->second
                                                  : parallel::tensor::replicated(t.shape()));
  }
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  collect_buffers("", out, &seen, /*persistent_only=*/false);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& c : children_) c.second->train(on);
}

std::vector<Tensor> Module::all_tensors() const {
  std::vector<Tensor> out = parameters();
  for (auto& [name, t] : named_buffers()) out.push_back(t);
  return out;
}

void Module::to(Device device) {
  autograd::NoGradGuard no_grad;
  for (const Tensor& t : all_tensors()) {
    if (t.device() == device) continue;
    Tensor grad = t.grad();
    replace_data(t, t.to(device));
    if (grad.defined()) t.set_grad(grad.to(device));
  }
}

void Module::to(DType dtype) {
  TS_CHECK(is_floating(dtype), "Module::to", "expected a floating dtype, got ", dtype_name(dtype));
  autograd::NoGradGuard no_grad;
  for (const Tensor& t : all_tensors()) {
    if (!is_floating(t.dtype()) || t.dtype() == dtype) continue;
    Tensor grad = t.grad();
    replace_data(t, t.to(dtype));
    if (grad.defined()) t.set_grad(grad.to(dtype));
  }
}

StateDict Module::state_dict() const {
  // PyTorch's order per module (own parameters, own buffers, then children) needs one walk that
  // interleaves both kinds, so collect per module rather than concatenating the two lists.
  struct Walker {
    static void walk(const Module& m, const std::string& prefix, StateDict& out) {
      for (const Entry& e : m.parameters_) out.emplace_back(prefix + e.name, e.tensor.detach());
      for (const Entry& e : m.buffers_)
        if (e.persistent) out.emplace_back(prefix + e.name, e.tensor.detach());
      for (const auto& [name, child] : m.children_) walk(*child, prefix + name + ".", out);
    }
  };
  StateDict out;
  Walker::walk(*this, "", out);
  return out;
}

LoadResult Module::load_state_dict(const StateDict& entries, bool strict) {
  // The module's tensors by name (shared tensors under each of their names).
  NamedTensors own;
  struct Walker {
    static void walk(const Module& m, const std::string& prefix, NamedTensors& out) {
      for (const Entry& e : m.parameters_) out.emplace_back(prefix + e.name, e.tensor);
      for (const Entry& e : m.buffers_)
        if (e.persistent) out.emplace_back(prefix + e.name, e.tensor);
      for (const auto& [name, child] : m.children_) walk(*child, prefix + name + ".", out);
    }
  };
  Walker::walk(*this, "", own);

  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : entries) {
    TS_CHECK(given.emplace(name, &t).second, kLoad, "expected each key once, got '", name,
             "' twice");
    TS_CHECK(t.defined(), kLoad, "expected a defined tensor for '", name, "'");
  }
  std::map<std::string, const Tensor*> wanted;
  for (const auto& [name, t] : own) wanted.emplace(name, &t);

  LoadResult result;
  for (const auto& [name, t] : own)
    if (!given.count(name)) result.missing_keys.push_back(name);
  for (const auto& [name, t] : entries)
    if (!wanted.count(name)) result.unexpected_keys.push_back(name);
  if (strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty())) {
    std::ostringstream msg;
    msg << "expected exactly the keys of " << type_name() << ", got";
    if (!result.missing_keys.empty()) msg << " missing keys: " << join(result.missing_keys) << ";";
    if (!result.unexpected_keys.empty())
      msg << " unexpected keys: " << join(result.unexpected_keys) << ";";
    std::string text = msg.str();
    text.pop_back();
    TS_FAIL(kLoad, text);
  }

  // Check everything first so a bad entry leaves the module untouched.
  for (const auto& [name, target] : own) {
    auto it = given.find(name);
    if (it == given.end()) continue;
    const Tensor& src = *it->second;
    TS_CHECK(src.shape() == target.shape(), kLoad, "expected '", name, "' of shape ",
             shape_str(target.shape()), ", got shape ", shape_str(src.shape()), " (module has ",
             shape_dtype(target), ", entry has ", shape_dtype(src), ")");
    TS_CHECK(src.dtype() == target.dtype(), kLoad, "expected '", name, "' of dtype ",
             dtype_name(target.dtype()), ", got dtype ", dtype_name(src.dtype()), " (module has ",
             shape_dtype(target), ", entry has ", shape_dtype(src), ")");
  }
  autograd::NoGradGuard no_grad;
  for (const auto& [name, target] : own) {
    auto it = given.find(name);
    if (it == given.end()) continue;
    const Tensor& src = *it->second;
    if (src.is_same(target) ||
        (src.storage() == target.storage() && src.offset() == target.offset() &&
         src.strides() == target.strides()))
      continue;  // loading a module's own state dict: nothing to copy
    target.copy_(src.device() == target.device() ? src : src.to(target.device()));
  }
  return result;
}

void Module::zero_grad(bool set_to_none) {
  for (const Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

}  // namespace tessera::nn
