// Adam and AdamW (torch.optim.Adam / AdamW formulas, amsgrad off), both through the shared
// kernels::adam_update so CPU and CUDA compute the same numbers. Adam adds weight_decay * p to the
// gradient; AdamW decays the weights first: p *= 1 - lr * weight_decay. State per parameter:
// exp_avg and exp_avg_sq (f32) and a step count for the bias corrections.
#pragma once

#include "optim/optimizer.h"

namespace tessera::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};
// PyTorch's AdamW defaults differ only in weight decay.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};
// JSON form: {"lr", "betas": [b1, b2], "eps", "weight_decay"}; unknown keys throw.
nlohmann::json to_json(const AdamOptions& o);
nlohmann::json to_json(const AdamWOptions& o);
void options_from_json(const nlohmann::json& j, AdamOptions* o);
void options_from_json(const nlohmann::json& j, AdamWOptions* o);
void validate(const AdamOptions& o);
void validate(const AdamWOptions& o);

class Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  Adam(const std::vector<ParamGroup>& groups, const AdamOptions& options = {});
  Adam(const std::vector<Tensor>& params, const AdamOptions& options = {});
  const char* type() const override { return "adam"; }
  bool elementwise() const override { return true; }

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_group(size_t group, std::span<const PendingUpdate> pending) override;
  std::vector<std::string> state_names(size_t group) const override { return {"exp_avg", "exp_avg_sq"}; }
};

class AdamW : public OptimizerWithOptions<AdamWOptions> {
 public:
  AdamW(const std::vector<ParamGroup>& groups, const AdamWOptions& options = {});
  AdamW(const std::vector<Tensor>& params, const AdamWOptions& options = {});
  const char* type() const override { return "adamw"; }
  bool elementwise() const override { return true; }

 protected:
  void update(size_t group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_group(size_t group, std::span<const PendingUpdate> pending) override;
  std::vector<std::string> state_names(size_t group) const override { return {"exp_avg", "exp_avg_sq"}; }
};

}  // namespace tessera::optim
