// Dropout as a module: active only in training mode. Its masks come from the default generator, so
// activation checkpointing (which rewinds that generator) replays the same masks.
#pragma once

#include "models/nn/module.h"

namespace tessera::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.0);
  std::string type_name() const override { return "Dropout"; }

  // Same shape; identity in eval mode or when p == 0.
  Tensor forward(const Tensor& x);
  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace tessera::nn
