// 3D tensor-parallel LayerNorm, Colossal-AI's LayerNorm3D, on the 3D activation layout
// (parallel/tensor/cube_3d.h): rank (i, j, k) holds (B / q, ..., C / q^2), feature chunk k q + j,
// so the (j, k) plane of one i holds every feature of batch chunk i. The mean and the variance
// over C are this rank's partial sums all-reduced over the input group, then over the output group
// (the plane has no group of its own; the two sums cover it), forward and backward (every rank of
// the plane uses the sum, so its gradient sums over the plane too), in two passes (mean, then the
// mean square of x - mean) as the serial kernel does.
//   weight, bias (C / q^3)  the 3D vector layout (parallel/tensor/placement_3d.h): all-gathered
//                           over the weight group to (C / q^2), gradients reduce-scattered there
// Needs C divisible by q^3 with affine parameters (q^2 without) and a batch divisible by q.
// Communication per rank, with n = B / q * ... (the rows of this rank's piece):
//   forward   input and output groups 2 all-reduces of n floats each; weight group 1 all-gather
//             of C / q^2 per affine parameter
//   backward  the same all-reduces (when the input requires grad); weight group 1 reduce-scatter
//             of C / q^2 per affine parameter
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/layer_norm.h"
#include "parallel/tensor/cube_3d.h"

namespace tessera::nn {

class LayerNorm3D final : public LayerNorm {
 public:
  // ctx must be tensor-parallel in mode 3d.
  LayerNorm3D(const LayerNormSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "LayerNorm3D"; }
  // (B / q, ..., C / q^2) -> (B / q, ..., C / q^2)
  Tensor forward(const Tensor& x) override;

  const parallel::tensor::Cube3D& cube() const { return cube_; }

 private:
  LayerNorm3D(const LayerNormSpec& spec, const parallel::tensor::Cube3D& cube,
              const parallel::tensor::Placement& placement);
  parallel::tensor::Cube3D cube_;
};

}  // namespace tessera::nn
