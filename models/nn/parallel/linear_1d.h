// Megatron's 1D tensor-parallel Linear pair over the tensor group of P ranks:
//   ColumnParallelLinear  weight rows (output features) split: input replicated (copy_to_region:
//                         its gradient is all-reduced), output left split (..., out / P). With
//                         fused_blocks k (q | k | v) each block is split, so a rank holds its
//                         heads' rows of every block.
//   RowParallelLinear     weight columns (input features) split: takes the column layer's split
//                         output, all-reduces its partial products (reduce_from_region), then adds
//                         the replicated bias.
// Under sequence parallelism (sequence_1d.h) the pair takes and gives sequence shards (B, T/P, C):
// the column layer all-gathers the sequence first (parallel::tensor::gathered_linear: the shard,
// not the gathered input, is kept for backward; the input gradient reduce-scatters), the row layer
// reduce-scatters along it instead of all-reducing and sums its bias's gradient over the group.
// Shards are drawn at their global indices (shard_init.h), so the gathered weights equal the serial
// Linear's from the same generator.
#pragma once

#include <memory>

#include "models/nn/build_context.h"
#include "models/nn/linear.h"

namespace tessera::nn {

class ColumnParallelLinear final : public Linear {
 public:
  ColumnParallelLinear(const LinearSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "ColumnParallelLinear"; }
  // (..., in) -> (..., out / P); sequence parallel: (B, T/P, in) -> (B, T, out / P)
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<parallel::Communicator> group_;
  bool sequence_parallel_ = false;
};

class RowParallelLinear final : public Linear {
 public:
  RowParallelLinear(const LinearSpec& spec, const BuildContext& ctx);
  std::string type_name() const override { return "RowParallelLinear"; }
  // (..., in / P) -> (..., out), summed over the group; sequence parallel: (B, T, in / P) ->
  // (B, T/P, out), this rank's rows of the sum
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<parallel::Communicator> group_;
  bool sequence_parallel_ = false;
};

}  // namespace tessera::nn
