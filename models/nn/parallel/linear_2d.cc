// 2D tensor-parallel Linear (see linear_2d.h).
#include "models/nn/parallel/linear_2d.h"

#include "autograd/ops.h"
#include "models/nn/parallel/placement_2d.h"
#include "models/nn/parallel/shard_init.h"

namespace tessera::nn {

using parallel::tensor::Placement;

Linear2D::Linear2D(const LinearSpec& spec, const BuildContext& ctx, ParallelStyle style)
    : Linear(spec, style, nullptr), grid_(ctx.summa_grid()) {
  const int64_t k = spec.fused_blocks;
  const Placement wp =
      weight_placement_2d({spec.out_features, spec.in_features}, grid_, "Linear2D", k);
  const Placement bp =
      spec.bias ? vector_placement_2d(spec.out_features, grid_, "Linear2D bias", k) : Placement{};
  Tensor w, b;
  draw_linear_shards(spec, ctx.generator(), wp, bp, w, b);
  adopt(w, wp, b, bp);
}

Tensor Linear2D::forward(const Tensor& x) {
  const int64_t local_in = weight().size(1);
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local_in, type_name(),
           "expected this rank's 2D block (B / q, ..., ", local_in, ") of an input with ",
           spec().in_features, " features, got ", x.defined() ? x.describe() : "undefined");
  // 2.5D: the weight blocks are the same on every depth layer, each layer's gradient its batch
  // slice's, summed over the depth group in backward.
  const Tensor w = parallel::tensor::depth_replica(weight(), grid_);
  Tensor y = parallel::tensor::summa_ab(x, transpose(w, 0, 1), grid_);
  return bias().defined() ? add(y, gather_vector_2d(bias(), grid_, spec().fused_blocks)) : y;
}

}  // namespace tessera::nn
