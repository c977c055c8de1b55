// LayerNorm over the last dim with optional affine weight (ones) and bias (zeros), like
// torch.nn.LayerNorm(dim). Build it through make_layer_norm (factory.h).
#pragma once

#include <memory>

#include "models/nn/module.h"
#include "parallel/comm/communicator.h"

namespace tessera::nn {

struct LayerNormSpec {
  int64_t dim = 0;
  double eps = 1e-5;
  bool affine = true;  // learnable weight
  bool bias = true;    // learnable bias (only with affine)
  // Sequence parallelism: the input is this rank's sequence shard over this group, so the weight
  // and bias (replicated) see only its rows. Their gradients are summed over the group in backward
  // (parallel::tensor::copy_to_region), leaving every rank the serial gradient: the trainer, the
  // clipping and the checkpoint treat them as any replicated parameter. Null: the whole input.
  std::shared_ptr<parallel::Communicator> grad_group{};
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

 protected:
  // For tensor-parallel twins (LayerNorm2D): the spec's checks, then this rank's shards (undefined
  // where the spec has none) registered with their placements instead of the whole ones / zeros.
  LayerNorm(const LayerNormSpec& spec, const Tensor& weight,
            const parallel::tensor::Placement& weight_placement, const Tensor& bias,
            const parallel::tensor::Placement& bias_placement)
      : LayerNorm([&] {
          LayerNormSpec no_affine = spec;
          no_affine.affine = false;
          return no_affine;
        }()) {
    spec_ = spec;
    if (weight.defined()) weight_ = register_parameter("weight", weight, weight_placement);
    if (bias.defined()) bias_ = register_parameter("bias", bias, bias_placement);
  }

 private:
  LayerNormSpec spec_;
  Tensor weight_, bias_;
};

}  // namespace tessera::nn
