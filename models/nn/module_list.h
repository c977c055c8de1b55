// ModuleList: an ordered container of child modules named "0", "1", ..., so a stack of blocks
// gets GPT-2's parameter names ("h.0.attn.c_attn.weight").
#pragma once

#include <memory>
#include <string>

#include "models/nn/module.h"

namespace tessera::nn {

class ModuleList : public Module {
 public:
  std::string type_name() const override { return "ModuleList"; }

  // The module's name is its position, or `name` (a pipeline stage holding blocks 4..7 names them
  // "4".."7", as the serial model does).
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module, const std::string& name = "") {
    register_module(name.empty() ? std::to_string(items_.size()) : name, module);
    items_.push_back(module);
    return module;
  }
  size_t size() const { return items_.size(); }
  // The i-th module as type M; throws when i is out of range or the module is not an M.
  template <typename M = Module>
  std::shared_ptr<M> at(size_t i) const {
    TS_CHECK(i < items_.size(), "ModuleList", "expected an index below ", items_.size(), ", got ",
             i);
    auto m = std::dynamic_pointer_cast<M>(items_[i]);
    TS_CHECK(m != nullptr, "ModuleList", "expected module ", i, " of the requested type, got ",
             items_[i]->type_name());
    return m;
  }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

}  // namespace tessera::nn
