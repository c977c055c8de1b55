// LARS (You et al. 2017, "Large Batch Training of Convolutional Networks") in the form used by
// SimCLR / BYOL / Barlow Twins: the decayed gradient is rescaled by a layer-wise trust ratio, then
// momentum SGD runs on it. PyTorch has no LARS; tests/optim/gen_optim_fixtures.py holds the float64
// reference. Per parameter:
//   d = g + weight_decay * p
//   q = eta * ||p|| / ||d|| when both norms are > 0, else 1;   d *= q
//   buf = d on the first step, else momentum * buf + d;  d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
// With exclude_1d, parameters with at most one dimension (biases, norm gains) get neither weight
// decay nor the trust ratio (plain momentum SGD), as those papers do.
#pragma once

#include "optim/optimizer.h"

namespace tessera::optim {

struct LarsOptions {
  double lr = 1e-1;
  double momentum = 0.9;
  double weight_decay = 0.0;
  double trust_coefficient = 1e-3;  // eta
  bool nesterov = false;
  bool exclude_1d = false;
};
// JSON: {"lr", "momentum", "weight_decay", "trust_coefficient", "nesterov", "exclude_1d"}.
nlohmann::json to_json(const LarsOptions& o);
void options_from_json(const nlohmann::json& j, LarsOptions* o);
void validate(const LarsOptions& o);

class Lars : public OptimizerWithOptions<LarsOptions> {
 public:
  Lars(const std::vector<ParamGroup>& groups, const LarsOptions& options = {});
  Lars(const std::vector<Tensor>& params, const LarsOptions& options = {});
  const char* type() const override { return "lars"; }

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  // {"momentum_buffer"} when momentum != 0.
  std::vector<std::string> state_names(size_t group) const override;
};

}  // namespace tessera::optim
