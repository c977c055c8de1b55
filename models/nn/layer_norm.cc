// LayerNorm construction and forward (see layer_norm.h).
#include "models/nn/layer_norm.h"

#include "autograd/ops.h"

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
  return layer_norm(x, weight_, bias_, spec_.eps);
}

}  // namespace tessera::nn
