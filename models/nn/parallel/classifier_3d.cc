// 3D tensor-parallel classifier (see classifier_3d.h).
#include "models/nn/parallel/classifier_3d.h"

#include "autograd/ops.h"
#include "models/nn/parallel/linear_3d.h"
#include "models/nn/parallel/shard_init.h"
#include "models/nn/parallel/split_3d.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

using parallel::tensor::Placement;

Classifier3D::Classifier3D(const LinearSpec& spec, const BuildContext& ctx, ParallelStyle style)
    : Linear(spec, style, nullptr), cube_(ctx.cube("Classifier3D")) {
  TS_CHECK(spec.fused_blocks == 1, "Classifier3D", "expected no fused blocks, got ",
           spec.fused_blocks);
  const Placement wp =
      features_placement_3d({spec.out_features, spec.in_features}, cube_.coords(), "Classifier3D");
  const Placement bp = parallel::tensor::replicated({spec.out_features});
  Tensor w, b;
  draw_linear_shards(spec, ctx.generator(), wp, bp, w, b);
  adopt(w, wp, b, bp);
}

Tensor Classifier3D::forward(const Tensor& x) {
  const int64_t q = cube_.q(), local = spec().in_features / (q * q);
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local, type_name(),
           "expected this rank's 3D piece (B / q, ..., ", local, ") of an input with ",
           spec().in_features, " features, got ", x.defined() ? x.describe() : "undefined");
  const Tensor w = parallel::tensor::all_gather_to_region(weight(), 1, cube_.weight);
  // The (j, k) plane holds every feature of batch chunk i: the sum of its partial products is the
  // chunk's logits, whose gradient (the same on the plane's ranks: the gathered logits' chunk)
  // passes as is.
  const Tensor partial = linear(x, w, Tensor());  // (B / q, ..., out)
  Tensor y = parallel::tensor::reduce_from_region(
      parallel::tensor::reduce_from_region(partial, cube_.input), cube_.output);
  // The batch chunks' bias gradients sum to the serial one.
  if (bias().defined()) y = add(y, parallel::tensor::copy_to_region(bias(), cube_.weight));
  return parallel::tensor::gather_from_region(y, 0, cube_.weight);  // (B, ..., out)
}

}  // namespace tessera::nn
