// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), the NVLAMB form of
// NVIDIA's apex FusedLAMB without its global gradient pre-normalisation (use clip_grad_norm for
// that). PyTorch has no LAMB; tests/optim/gen_optim_fixtures.py holds the float64 reference.
// Per parameter, step t:
//   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
//   u = (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * p      (bc_i = 1 - b_i^t, or 1 without
//                                                                  bias correction)
//   r = ||p|| / ||u|| when both norms are > 0, else 1               (the trust ratio)
//   p -= lr * r * u
// The trust ratio applies to every parameter, also those in a no-decay group; norms in double.
#pragma once

#include "optim/optimizer.h"

namespace tessera::optim {

struct LambOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 1e-2;
  bool bias_correction = true;
};
// JSON: {"lr", "betas": [b1, b2], "eps", "weight_decay", "bias_correction"}; unknown keys throw.
nlohmann::json to_json(const LambOptions& o);
void options_from_json(const nlohmann::json& j, LambOptions* o);
void validate(const LambOptions& o);

class Lamb : public OptimizerWithOptions<LambOptions> {
 public:
  Lamb(const std::vector<ParamGroup>& groups, const LambOptions& options = {});
  Lamb(const std::vector<Tensor>& params, const LambOptions& options = {});
  const char* type() const override { return "lamb"; }

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  std::vector<std::string> state_names(size_t group) const override { return {"exp_avg", "exp_avg_sq"}; }
};

}  // namespace tessera::optim
