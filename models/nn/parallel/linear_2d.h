// 2D (SUMMA) tensor-parallel Linear on the q x q grid, Colossal-AI's Linear2D. On the 2D activation
// layout (parallel/tensor/summa.h: batch cut by grid row, features by grid column):
//   input   (B / q, ..., in / q)   rank (r, s): batch chunk r, input features chunk s
//   output  (B / q, ..., out / q)  rank (r, s): batch chunk r, output features chunk s, so a
//                                  Linear2D feeds the next one (or a LayerNorm2D) directly
//   weight  (out / q, in / q)      the block [r][s] of W^T (placement_2d.h); Y = summa_ab(X, W^T)
//   bias    (out / q^2)            Colossal-AI's bias layout (placement_2d.h): all-gathered over
//                                  the grid column to (out / q) and added; its gradient, summed
//                                  over the batch, reduce-scattered back over the grid column
// With fused_blocks k (attention's q | k | v) each block's output features are cut so, and this
// rank's output holds chunk s of every block, in block order (its heads' q, k and v).
// Under 2.5D (mode 2.5d, depth d) each depth layer does the same on its batch slice, B / (d q) rows
// per block, with the same weight and bias blocks (their gradients summed over the depth group:
// backward adds 1 all-reduce of w and 1 of out / q^2 over "2.5d_dep").
// Every Linear is split this way under mode 2d, whatever the call site's ParallelStyle hint (kept
// for parallel_style()), but a classifier's (make_classifier: Classifier2D). Needs in and out
// divisible by q (out by q^2 with a bias; k q and k q^2 fused) and a batch divisible by q. Shards
// are drawn at their global indices (shard_init.h): the gathered weights equal the serial
// Linear's from the same generator, which advances exactly as the serial one.
// Communication per rank, with x, w and y the bytes of this rank's input, weight and output blocks:
//   forward   row group: q broadcasts of x; column group: q broadcasts of w, 1 all-gather of the
//             bias (out / q)
//   backward  dX (when the input requires grad): column group q broadcasts of w, row group
//             q reduces of x; dW: row group q broadcasts of x, column group q reduces of w;
//             bias: column group 1 reduce-scatter (out / q)
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/linear.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

class Linear2D final : public Linear {
 public:
  // ctx must be tensor-parallel in mode 2d or 2.5d.
  Linear2D(const LinearSpec& spec, const BuildContext& ctx,
           ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Linear2D"; }
  // (B / q, ..., in / q) -> (B / q, ..., out / q)
  Tensor forward(const Tensor& x) override;

  const parallel::tensor::SummaGrid& grid() const { return grid_; }

 private:
  parallel::tensor::SummaGrid grid_;
};

}  // namespace tessera::nn
