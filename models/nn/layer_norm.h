// LayerNorm over the last dim with optional affine weight (ones) and bias (zeros), like
// torch.nn.LayerNorm(dim). Build it through make_layer_norm (factory.h).
#pragma once

#include "models/nn/module.h"

namespace tessera::nn {

struct LayerNormSpec {
  int64_t dim = 0;
  double eps = 1e-5;
  bool affine = true;  // learnable weight
  bool bias = true;    // learnable bias (only with affine)
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(const LayerNormSpec& spec);
  std::string type_name() const override { return "LayerNorm"; }

  // (..., dim) -> (..., dim)
  virtual Tensor forward(const Tensor& x);

  const Tensor& weight() const { return weight_; }  // (dim) or undefined
  const Tensor& bias() const { return bias_; }      // (dim) or undefined
  const LayerNormSpec& spec() const { return spec_; }

 private:
  LayerNormSpec spec_;
  Tensor weight_, bias_;
};

}  // namespace tessera::nn
