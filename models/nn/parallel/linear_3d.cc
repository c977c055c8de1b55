// 3D tensor-parallel Linear (see linear_3d.h).
#include "models/nn/parallel/linear_3d.h"

#include "autograd/ops.h"
#include "models/nn/parallel/shard_init.h"
#include "parallel/tensor/matmul_3d.h"
#include "parallel/tensor/placement_3d.h"

namespace tessera::nn {

using parallel::tensor::Placement;

DropoutChunk dropout_chunk_3d(const parallel::tensor::Cube3D& cube) {
  const parallel::tensor::CubeCoords at = cube.coords();
  return {.dim = -1,
          .parts = at.q * at.q,
          .index = at.feature_chunk(),
          .batch_parts = at.q,
          .batch_index = at.i};
}

Linear3D::Linear3D(const LinearSpec& spec, const BuildContext& ctx, ParallelStyle style)
    : Linear(spec, style, nullptr), cube_(ctx.cube("Linear3D")) {
  const int64_t f = spec.fused_blocks;
  const parallel::tensor::CubeCoords at = cube_.coords();
  const Placement wp = parallel::tensor::weight_placement_3d({spec.out_features, spec.in_features},
                                                             at, "Linear3D", f);
  const Placement bp =
      spec.bias ? parallel::tensor::vector_placement_3d(spec.out_features, at, "Linear3D bias", f)
                : Placement{};
  Tensor w, b;
  draw_linear_shards(spec, ctx.generator(), wp, bp, w, b);
  adopt(w, wp, b, bp);
}

Tensor Linear3D::forward(const Tensor& x) {
  const int64_t local_in = weight().size(1);
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local_in, type_name(),
           "expected this rank's 3D piece (B / q, ..., ", local_in, ") of an input with ",
           spec().in_features, " features, got ", x.defined() ? x.describe() : "undefined");
  const int64_t f = spec().fused_blocks;
  Tensor y = parallel::tensor::linear_3d(x, weight(), cube_, f);
  return bias().defined() ? add(y, parallel::tensor::gather_vector_3d(bias(), cube_, f)) : y;
}

}  // namespace tessera::nn
