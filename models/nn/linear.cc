// Linear layer construction, initialisation and forward (see linear.h).
#include "models/nn/linear.h"

#include <cmath>

#include "autograd/ops.h"

namespace tessera::nn {

void Linear::check_spec(const LinearSpec& spec) {
  TS_CHECK(spec.in_features > 0 && spec.out_features > 0, "Linear",
           "expected positive in_features and out_features, got ", spec.in_features, " and ",
           spec.out_features);
  TS_CHECK(spec.init_std >= 0.0, "Linear", "expected init_std >= 0, got ", spec.init_std);
  TS_CHECK(spec.fused_blocks >= 1 && spec.out_features % spec.fused_blocks == 0, "Linear",
           "expected out_features ", spec.out_features, " divisible by fused_blocks ",
           spec.fused_blocks);
}

Linear::Linear(const LinearSpec& spec, ParallelStyle style, std::nullptr_t)
    : spec_(spec), style_(style) {
  check_spec(spec);
}

void Linear::adopt(const Tensor& weight, const parallel::tensor::Placement& weight_placement,
                   const Tensor& bias, const parallel::tensor::Placement& bias_placement) {
  weight_ = register_parameter("weight", weight, weight_placement);
  if (bias.defined()) bias_ = register_parameter("bias", bias, bias_placement);
}

Linear::Linear(const LinearSpec& spec, Generator& gen, ParallelStyle style)
    : spec_(spec), style_(style) {
  check_spec(spec);
  Tensor w = empty({spec.out_features, spec.in_features});
  Tensor b = spec.bias ? empty({spec.out_features}) : Tensor();
  switch (spec.init) {
    case LinearInit::normal:
      normal_(w, 0.0, spec.init_std, &gen);
      if (b.defined()) b.zero_();
      break;
    case LinearInit::uniform: {
      const double bound = 1.0 / std::sqrt(double(spec.in_features));
      uniform_(w, -bound, bound, &gen);
      if (b.defined()) uniform_(b, -bound, bound, &gen);
      break;
    }
    case LinearInit::zeros:
      w.zero_();
      if (b.defined()) b.zero_();
      break;
  }
  weight_ = register_parameter("weight", w);
  if (b.defined()) bias_ = register_parameter("bias", b);
}

Tensor Linear::forward(const Tensor& x) {
  TS_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == spec_.in_features, "Linear",
           "expected input (..., ", spec_.in_features, "), got ",
           x.defined() ? x.describe() : "undefined");
  return linear(x, weight_, bias_);
}

}  // namespace tessera::nn
