// Stochastic gradient descent with momentum, dampening, Nesterov momentum and (coupled) weight
// decay, exactly torch.optim.SGD's update:
//   d = g + wd * p;  buf = d on the first step, else momentum * buf + (1 - dampening) * d;
//   d = nesterov ? d + momentum * buf : buf;  p -= lr * d
#pragma once

#include "optim/optimizer.h"

namespace tessera::optim {

struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0, as in PyTorch
};
nlohmann::json to_json(const SgdOptions& o);
// Reads {"lr", "momentum", "dampening", "weight_decay", "nesterov"} over *o; unknown keys throw.
void options_from_json(const nlohmann::json& j, SgdOptions* o);
void validate(const SgdOptions& o);

class SGD : public OptimizerWithOptions<SgdOptions> {
 public:
  SGD(const std::vector<ParamGroup>& groups, const SgdOptions& options = {});
  SGD(const std::vector<Tensor>& params, const SgdOptions& options = {});
  const char* type() const override { return "sgd"; }
  bool elementwise() const override { return true; }

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  // {"momentum_buffer"} when momentum != 0.
  std::vector<std::string> state_names(size_t group) const override;
};

}  // namespace tessera::optim
