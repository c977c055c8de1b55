// f32 master weights for bf16 / f16 models: the model computes in low precision, the optimizer
// steps f32 copies, and the model parameters are refreshed from them by round-to-nearest-even.
// One step:  backward -> grads_to_master() -> [scaler.]step(optimizer over masters())
//            -> master_to_model() -> zero_grad().
#pragma once

#include <vector>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace tessera::optim {

class MasterWeights {
 public:
  // model_params: floating leaves of any dtype. f32 parameters are their own masters (no copy).
  explicit MasterWeights(const std::vector<Tensor>& model_params);

  // The f32 tensors the optimizer should own, in the order of model_params.
  const std::vector<Tensor>& masters() const { return masters_; }
  const std::vector<Tensor>& model_params() const { return model_; }
  // The same groups over the masters (each model parameter replaced by its master).
  std::vector<ParamGroup> master_groups(const std::vector<ParamGroup>& model_groups) const;

  // Each master's grad = its model parameter's grad converted to f32 (undefined stays undefined).
  void grads_to_master() const;
  // Each low-precision model parameter = its master rounded to nearest even.
  void master_to_model() const;
  // Clears the gradients of the model parameters and of the masters.
  void zero_grad() const;

 private:
  std::vector<Tensor> model_;
  std::vector<Tensor> masters_;
};

}  // namespace tessera::optim
