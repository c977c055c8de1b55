// 1D tensor-parallel linears (see linear_1d.h).
#include "models/nn/parallel/linear_1d.h"

#include "autograd/ops.h"
#include "models/nn/parallel/sequence_1d.h"
#include "models/nn/parallel/shard_init.h"
#include "parallel/tensor/gathered_linear.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

using parallel::tensor::Placement;

ColumnParallelLinear::ColumnParallelLinear(const LinearSpec& spec, const BuildContext& ctx)
    : Linear(spec, ParallelStyle::column, nullptr),
      group_(ctx.tensor_group()),
      sequence_parallel_(ctx.sequence_parallel()) {
  const int p = ctx.tensor_size(), r = ctx.tensor_rank();
  const int64_t k = spec.fused_blocks, block = spec.out_features / k;
  TS_CHECK(block % p == 0, "ColumnParallelLinear", "expected ", k > 1 ? "each fused block of " : "",
           block, " output features divisible by the tensor-parallel size ", p);
  // Viewed as (k, block, in) / (k, block): each fused block split along its rows.
  const Placement wp = parallel::tensor::split({spec.out_features, spec.in_features}, 1, p, r,
                                               "tensor", {k, block, spec.in_features});
  const Placement bp = parallel::tensor::split({spec.out_features}, 1, p, r, "tensor", {k, block});
  Tensor w, b;
  draw_linear_shards(spec, ctx.generator(), wp, bp, w, b);
  adopt(w, wp, b, bp);
}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  TS_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == spec().in_features, type_name(),
           "expected input (..., ", spec().in_features, "), got ",
           x.defined() ? x.describe() : "undefined");
  if (!sequence_parallel_)
    return linear(parallel::tensor::copy_to_region(x, group_), weight(), bias());
  TS_CHECK(x.dim() == 3, type_name(), "expected a sequence shard (B, T/P, ", spec().in_features,
           ") under sequence parallelism, got ", x.describe());
  // Over every rank's rows (B, T, in), keeping only this shard for backward, which gathers it
  // again and reduce-scatters the partial input gradients.
  return parallel::tensor::gathered_linear(x, weight(), bias(), kSequenceDim, group_);
}

RowParallelLinear::RowParallelLinear(const LinearSpec& spec, const BuildContext& ctx)
    : Linear(spec, ParallelStyle::row, nullptr),
      group_(ctx.tensor_group()),
      sequence_parallel_(ctx.sequence_parallel()) {
  const int p = ctx.tensor_size(), r = ctx.tensor_rank();
  TS_CHECK(spec.in_features % p == 0, "RowParallelLinear", "expected ", spec.in_features,
           " input features divisible by the tensor-parallel size ", p);
  const Placement wp =
      parallel::tensor::split({spec.out_features, spec.in_features}, 1, p, r, "tensor");
  const Placement bp = parallel::tensor::replicated({spec.out_features});
  Tensor w, b;
  draw_linear_shards(spec, ctx.generator(), wp, bp, w, b);
  adopt(w, wp, b, bp);
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  const int64_t local_in = weight().size(1);
  TS_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == local_in, type_name(),
           "expected this rank's input features (..., ", local_in, "), got ",
           x.defined() ? x.describe() : "undefined");
  if (!sequence_parallel_) {
    Tensor y = parallel::tensor::reduce_from_region(linear(x, weight(), Tensor()), group_);
    return bias().defined() ? add(y, bias()) : y;
  }
  TS_CHECK(x.dim() == 3, type_name(), "expected (B, T, ", local_in,
           ") under sequence parallelism, got ", x.describe());
  // (B, T/P, out): this rank's rows of the sum; the bias, added to a shard, has its gradient
  // summed over the group in backward (copy_to_region).
  Tensor y = parallel::tensor::reduce_scatter_to_region(linear(x, weight(), Tensor()), kSequenceDim,
                                                        group_);
  return bias().defined() ? add(y, parallel::tensor::copy_to_region(bias(), group_)) : y;
}

}  // namespace tessera::nn
