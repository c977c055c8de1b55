// Linear: y = x @ weight^T + bias with weight (out, in), like torch.nn.Linear. Build it through
// make_linear (factory.h) so a tensor-parallel twin can take its place.
#pragma once

#include "core/generator.h"
#include "models/nn/module.h"
#include "models/nn/parallel_style.h"

namespace tessera::nn {

enum class LinearInit {
  normal,   // weight ~ N(0, init_std), bias 0 (GPT-2, BERT, ViT)
  uniform,  // weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)) (torch.nn.Linear's default bound)
  zeros,    // all zero (e.g. a classifier head started at zero)
};

struct LinearSpec {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  LinearInit init = LinearInit::normal;
  double init_std = 0.02;  // for LinearInit::normal; residual projections pass 0.02 / sqrt(2 L)
  // The output features are this many equal blocks computed together (GPT-2's fused q | k | v:
  // 3). A column-parallel twin splits each block, so every rank holds its heads' q, k and v.
  int64_t fused_blocks = 1;
};

class Linear : public Module {
 public:
  // Draws the initial weights from gen. `style` is the parallel form the call site asked for;
  // this serial layer computes the whole product whatever it is (see factory.h).
  Linear(const LinearSpec& spec, Generator& gen, ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Linear"; }

  // (..., in) -> (..., out)
  virtual Tensor forward(const Tensor& x);

  const Tensor& weight() const { return weight_; }  // (out, in)
  const Tensor& bias() const { return bias_; }      // (out) or undefined
  const LinearSpec& spec() const { return spec_; }
  ParallelStyle parallel_style() const { return style_; }

 protected:
  // For tensor-parallel twins: checks the spec and keeps the hint without drawing weights;
  // adopt() then registers the shards with their placements.
  Linear(const LinearSpec& spec, ParallelStyle style, std::nullptr_t);
  void adopt(const Tensor& weight, const parallel::tensor::Placement& weight_placement,
             const Tensor& bias, const parallel::tensor::Placement& bias_placement);

 private:
  static void check_spec(const LinearSpec& spec);
  LinearSpec spec_;
  ParallelStyle style_;
  Tensor weight_, bias_;
};

}  // namespace tessera::nn
