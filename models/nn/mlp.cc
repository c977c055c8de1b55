// Transformer MLP construction and forward (see mlp.h).
#include "models/nn/mlp.h"

#include "autograd/ops.h"
#include "models/nn/attention.h"
#include "models/nn/factory.h"

namespace tessera::nn {

MLP::MLP(const MLPSpec& spec, const BuildContext& ctx) : spec_(spec) {
  TS_CHECK(spec.d_model > 0 && spec.hidden >= 0, "MLP",
           "expected d_model > 0 and hidden >= 0, got ", spec.d_model, " and ", spec.hidden);
  TS_CHECK(spec.gelu == "tanh" || spec.gelu == "none", "MLP",
           "expected gelu 'tanh' or 'none', got '", spec.gelu, "'");
  if (spec_.hidden == 0) spec_.hidden = 4 * spec.d_model;
  c_fc_ = register_module("c_fc", make_linear({.in_features = spec.d_model,
                                               .out_features = spec_.hidden,
                                               .bias = spec.bias,
                                               .init_std = spec.init_std},
                                              ctx, ParallelStyle::column));
  c_proj_ = register_module(
      "c_proj", make_linear({.in_features = spec_.hidden,
                             .out_features = spec.d_model,
                             .bias = spec.bias,
                             .init_std = residual_init_std(spec.init_std, spec.residual_layers)},
                            ctx, ParallelStyle::row));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(spec.dropout));
}

Tensor MLP::forward(const Tensor& x) {
  return dropout_->forward(c_proj_->forward(gelu(c_fc_->forward(x), spec_.gelu)));
}

}  // namespace tessera::nn
