// 2D tensor-parallel attention (see attention_2d.h): the serial forward on this rank's heads and
// batch chunk; the factories give it Linear2D projections.
#include "models/nn/parallel/attention_2d.h"

#include "core/error.h"

namespace tessera::nn {
namespace {

AttentionSplit split_2d(const AttentionSpec& spec, const BuildContext& ctx) {
  const parallel::tensor::SummaGrid grid = ctx.summa_grid();
  const int q = grid.q();
  TS_CHECK(spec.n_heads % q == 0, "MultiHeadAttention2D", "expected n_heads ", spec.n_heads,
           " divisible by the 2D grid side q = ", q,
           " (each grid column computes n_heads / q of the heads)");
  return {.head_parts = q,
          .head_index = grid.grid_col(),
          .batch_parts = grid.batch_parts(),
          .batch_index = grid.batch_index()};
}

}  // namespace

MultiHeadAttention2D::MultiHeadAttention2D(const AttentionSpec& spec, const BuildContext& ctx)
    : MultiHeadAttention(spec, ctx, split_2d(spec, ctx)) {}

}  // namespace tessera::nn
