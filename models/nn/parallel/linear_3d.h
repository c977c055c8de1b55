// 3D tensor-parallel Linear on the q x q x q cube, Colossal-AI's Linear3D, on the 3D activation
// layout (parallel/tensor/cube_3d.h: batch cut by i, features in q^2 chunks, rank (i, j, k) holding
// chunk k q + j):
//   input   (B / q, ..., in / q^2)    output (B / q, ..., out / q^2), the same layout, so a
//                                     Linear3D feeds the next one (or a LayerNorm3D) directly
//   weight  (out / q, in / q^2)       parallel/tensor/placement_3d.h; y = linear_3d(x, weight)
//   bias    (out / q^3)               all-gathered over the weight group to (out / q^2) and added;
//                                     its gradient, summed over the batch chunk, reduce-scattered
//                                     back there
// With fused_blocks f (attention's q | k | v) each block's output features are cut so. Needs in
// and out divisible by q^2 (out by q^3 with a bias; by f q^2 and f q^3 fused) and a batch
// divisible by q. Shards are drawn at their global indices (shard_init.h): the gathered weights
// equal the serial Linear's from the same generator, which advances exactly as the serial one.
// Communication per rank: linear_3d's (parallel/tensor/matmul_3d.h), plus for the bias one
// all-gather (forward) and one reduce-scatter (backward) of out / q^2 over the weight group.
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/dropout.h"
#include "models/nn/linear.h"
#include "parallel/tensor/cube_3d.h"

namespace tessera::nn {

class Linear3D final : public Linear {
 public:
  // ctx must be tensor-parallel in mode 3d. `style` is the call site's hint, kept for
  // parallel_style(): under 3D every Linear is split the same way.
  Linear3D(const LinearSpec& spec, const BuildContext& ctx,
           ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Linear3D"; }
  // (B / q, ..., in / q^2) -> (B / q, ..., out / q^2)
  Tensor forward(const Tensor& x) override;

  const parallel::tensor::Cube3D& cube() const { return cube_; }

 private:
  parallel::tensor::Cube3D cube_;
};

// Where this rank's piece of the residual stream (B, T, C) lies in the serial tensor, for its
// Dropouts (masks drawn at global positions): batch chunk i of q, features chunk k q + j of q^2.
DropoutChunk dropout_chunk_3d(const parallel::tensor::Cube3D& cube);

}  // namespace tessera::nn
