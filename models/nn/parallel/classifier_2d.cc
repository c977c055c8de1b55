// 2D tensor-parallel classifier (see classifier_2d.h).
#include "models/nn/parallel/classifier_2d.h"

#include "autograd/ops.h"
#include "models/nn/parallel/placement_2d.h"
#include "models/nn/parallel/shard_init.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

using parallel::tensor::Placement;

Classifier2D::Classifier2D(const LinearSpec& spec, const BuildContext& ctx, ParallelStyle style)
    : Linear(spec, style, nullptr), grid_(ctx.summa_grid()) {
  const Placement wp =
      columns_placement_2d({spec.out_features, spec.in_features}, grid_, "Classifier2D");
  const Placement bp = parallel::tensor::replicated({spec.out_features});
  Tensor w, b;
  draw_linear_shards(spec, ctx.generator(), wp, bp, w, b);
  adopt(w, wp, b, bp);
}

Tensor Classifier2D::forward(const Tensor& x) {
  const int64_t local = spec().in_features / grid_.q();
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local, type_name(),
           "expected this rank's 2D block (B / q, ..., ", local, ") of an input with ",
           spec().in_features, " features, got ", x.defined() ? x.describe() : "undefined");
  const Tensor w = gather_columns_2d(weight(), grid_);  // (out, in / q)
  // The row holds every feature of its batch chunk: the sum of its partial products is the chunk's
  // logits, whose gradient (the same on the row's ranks: the gathered logits' chunk) passes as is.
  Tensor y = parallel::tensor::reduce_from_region(linear(x, w, Tensor()), grid_.row);
  // The batch chunks' (over the depth layers too, under 2.5D) bias gradients sum to the serial one.
  if (bias().defined()) y = add(y, parallel::tensor::copy_to_region(bias(), grid_.batch_group()));
  return parallel::tensor::gather_from_region(y, 0, grid_.batch_group());  // (B, ..., out)
}

}  // namespace tessera::nn
