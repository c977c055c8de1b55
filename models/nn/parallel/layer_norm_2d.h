// 2D tensor-parallel LayerNorm, Colossal-AI's LayerNorm2D, on the 2D activation layout
// (parallel/tensor/summa.h): rank (grid row r, column s) holds (B / q, ..., C / q), the features
// chunk s, so a row of the grid holds every feature of its batch chunk. The mean and the variance
// over C are this rank's partial sums all-reduced over the row group (forward and backward: the
// sum is used by every rank of the row, so its gradient sums over the row too), computed in two
// passes (mean, then the mean square of x - mean) as the serial kernel does.
//   weight, bias (C / q^2)  Colossal-AI's vector layout (placement_2d.h): all-gathered over the
//                           grid column to (C / q), gradients reduce-scattered there
// Needs C divisible by q^2 and a batch divisible by q. 2.5D: the same on each depth layer's batch
// slice; the affine parameters' gradients are then summed over the depth group too.
// Communication per rank, with n = B / q * ... (the rows of this rank's block):
//   forward   row group 2 all-reduces of n floats; column group 1 all-gather of C / q per
//             affine parameter
//   backward  row group 2 all-reduces of n floats (when the input requires grad); column group 1
//             reduce-scatter of C / q per affine parameter
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/layer_norm.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

class LayerNorm2D final : public LayerNorm {
 public:
  // ctx must be tensor-parallel in mode 2d or 2.5d.
  LayerNorm2D(const LayerNormSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "LayerNorm2D"; }
  // (B / q, ..., C / q) -> (B / q, ..., C / q)
  Tensor forward(const Tensor& x) override;

  const parallel::tensor::SummaGrid& grid() const { return grid_; }

 private:
  LayerNorm2D(const LayerNormSpec& spec, const parallel::tensor::SummaGrid& grid,
              const parallel::tensor::Placement& placement);
  parallel::tensor::SummaGrid grid_;
};

}  // namespace tessera::nn
