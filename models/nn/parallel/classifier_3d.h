// 3D tensor-parallel classifier (Colossal-AI's Classifier3D): a Linear to a few classes (an output
// that does not split over the cube) on the 3D activation layout (parallel/tensor/cube_3d.h), rank
// (i, j, k) taking the piece (B / q, ..., in / q^2), batch chunk i, features chunk k q + j.
//   weight (out, in)  its columns (in features) cut as a 3D vector (split_3d.h): (out, in / q^3),
//                     all-gathered over the weight group to the features chunk's (out, in / q^2);
//                     the partial logits x w^T summed over the (j, k) plane (the input, then the
//                     output group) are batch chunk i's logits
//   bias (out)        replicated; its gradient summed over the weight group (the batch chunks),
//                     so every rank holds the serial one
//   output            the whole batch's logits (B, ..., out) on every rank, gathered over the
//                     weight group (what the losses and metrics read); their gradient must be the
//                     same on every rank (a loss computed alike everywhere)
// Needs in divisible by q^3 and a batch divisible by q. Shards are drawn at their global indices
// (shard_init.h): the gathered weight equals the serial Linear's from the same generator.
// Communication per rank: forward weight all-gather of (out, in / q^2), input and output
// all-reduces of the chunk's (B / q, ..., out), weight all-gather of it; backward weight
// reduce-scatter of the weight gradient and all-reduce of the bias's.
#pragma once

#include "models/nn/build_context.h"
#include "models/nn/linear.h"
#include "parallel/tensor/cube_3d.h"

namespace tessera::nn {

class Classifier3D final : public Linear {
 public:
  // ctx must be tensor-parallel in mode 3d.
  Classifier3D(const LinearSpec& spec, const BuildContext& ctx,
               ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Classifier3D"; }
  // (B / q, ..., in / q^2) -> (B, ..., out)
  Tensor forward(const Tensor& x) override;

 private:
  parallel::tensor::Cube3D cube_;
};

}  // namespace tessera::nn
