// LayerNorm construction and forward (see layer_norm.h).
#include "models/nn/layer_norm.h"

#include "autograd/ops.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

LayerNorm::LayerNorm(const LayerNormSpec& spec) : spec_(spec) {
  TS_CHECK(spec.dim > 0, "LayerNorm", "expected a positive dim, got ", spec.dim);
  TS_CHECK(spec.eps > 0.0, "LayerNorm", "expected eps > 0, got ", spec.eps);
  if (spec.affine) {
    weight_ = register_parameter("weight", ones({spec.dim}));
    if (spec.bias) bias_ = register_parameter("bias", zeros({spec.dim}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  TS_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == spec_.dim, "LayerNorm",
           "expected input (..., ", spec_.dim, "), got ", x.defined() ? x.describe() : "undefined");
  if (!spec_.grad_group) return layer_norm(x, weight_, bias_, spec_.eps);
  // Identity forward; backward sums this shard's partial gradient over the group.
  auto summed = [&](const Tensor& p) {
    return p.defined() ? parallel::tensor::copy_to_region(p, spec_.grad_group) : p;
  };
  return layer_norm(x, summed(weight_), summed(bias_), spec_.eps);
}

}  // namespace tessera::nn
