// 3D tensor-parallel attention (see attention_3d.h): the serial forward on this rank's heads and
// batch chunk; the factories give it Linear3D projections.
#include "models/nn/parallel/attention_3d.h"

#include "core/error.h"
#include "models/nn/parallel/linear_3d.h"

namespace tessera::nn {
namespace {

AttentionSplit split_3d(const AttentionSpec& spec, const BuildContext& ctx) {
  const parallel::tensor::CubeCoords at = ctx.cube("MultiHeadAttention3D").coords();
  const int q2 = at.q * at.q;
  TS_CHECK(spec.n_heads % q2 == 0, "MultiHeadAttention3D", "expected n_heads ", spec.n_heads,
           " divisible by q^2 = ", q2, " (the 3D cube side q = ", at.q,
           "; each feature chunk k q + j computes n_heads / q^2 of the heads)");
  return {
      .head_parts = q2, .head_index = at.feature_chunk(), .batch_parts = at.q, .batch_index = at.i};
}

}  // namespace

MultiHeadAttention3D::MultiHeadAttention3D(const AttentionSpec& spec, const BuildContext& ctx)
    : MultiHeadAttention(spec, ctx, split_3d(spec, ctx)) {}

}  // namespace tessera::nn
