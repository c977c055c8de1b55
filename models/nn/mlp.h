// The transformer MLP: c_fc (C -> hidden, default 4C), GELU (tanh approximation as GPT-2, or exact
// erf as BERT/ViT), c_proj (hidden -> C), residual dropout.
#pragma once

#include <memory>
#include <string>

#include "core/generator.h"
#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "models/nn/linear.h"

namespace tessera::nn {

struct MLPSpec {
  int64_t d_model = 0;
  int64_t hidden = 0;         // 0: 4 * d_model
  std::string gelu = "tanh";  // "tanh" or "none" (exact erf), as autograd's gelu
  bool bias = true;
  double dropout = 0.0;  // after c_proj (training only)
  double init_std = 0.02;
  int64_t residual_layers = 0;  // > 0: c_proj drawn with init_std / sqrt(2 * residual_layers)
};

class MLP : public Module {
 public:
  // Builds c_fc with make_linear(ParallelStyle::column) and c_proj with ParallelStyle::row.
  MLP(const MLPSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "MLP"; }

  // (..., C) -> (..., C)
  virtual Tensor forward(const Tensor& x);

  const std::shared_ptr<Linear>& c_fc() const { return c_fc_; }
  const std::shared_ptr<Linear>& c_proj() const { return c_proj_; }
  const MLPSpec& spec() const { return spec_; }

 private:
  MLPSpec spec_;
  std::shared_ptr<Linear> c_fc_, c_proj_;
  std::shared_ptr<Dropout> dropout_;
};

}  // namespace tessera::nn
