// 2D (SUMMA) tensor-parallel classifier (Colossal-AI's Classifier2D): a Linear to a few classes
// (or any output that does not split over the grid) on the 2D activation layout
// (parallel/tensor/summa.h), rank (grid row r, column s) taking the block (B / q, ..., in / q).
//   weight (out, in)  its columns (in features) cut as a 2D vector (placement_2d.h):
//                     (out, in / q^2), all-gathered over the column group to the grid column's
//                     (out, in / q); the partial logits x w^T summed over the row group are the
//                     batch chunk's logits
//   bias (out)        replicated; its gradient summed over the column group (the batch chunks),
//                     so every rank holds the serial one
//   output            the whole batch's logits (B, ..., out) on every rank, gathered over the
//                     column group (what the losses and metrics read); their gradient must be
//                     the same on every rank (a loss computed alike everywhere)
// Needs in divisible by q^2 and a batch divisible by q (2.5D: d q; the column group's bias and
// logits ops then run over the batch group "2.5d_xz", the weight's gradient is summed over the
// depth group).
// Communication per rank: forward column all-gather of (out, in / q), row all-reduce of the
// chunk's (B / q, ..., out), column all-gather of it; backward column reduce-scatter of the weight
// gradient and all-reduce of the bias's.
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/linear.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

class Classifier2D final : public Linear {
 public:
  // ctx must be tensor-parallel in mode 2d or 2.5d.
  Classifier2D(const LinearSpec& spec, const BuildContext& ctx,
               ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Classifier2D"; }
  // (B / q, ..., in / q) -> (B, ..., out)
  Tensor forward(const Tensor& x) override;

 private:
  parallel::tensor::SummaGrid grid_;
};

}  // namespace tessera::nn
