// 2D tensor-parallel patch embedding (see patch_embedding_2d.h).
#include "models/nn/parallel/patch_embedding_2d.h"

#include "core/error.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

PatchEmbedding2D::PatchEmbedding2D(const PatchEmbeddingSpec& spec, const BuildContext& ctx)
    : PatchEmbedding(spec, ctx), grid_(ctx.summa_grid()) {}

Tensor PatchEmbedding2D::forward(const Tensor& x) {
  TS_CHECK(x.defined() && x.dim() == 4 && x.size(0) % grid_.batch_parts() == 0, type_name(),
           "expected images (B, C, H, W) with the batch B divisible by ",
           parallel::tensor::batch_split_text(grid_), ", got ",
           x.defined() ? x.describe() : "undefined");
  // Batch chunk r (rows of the column group; 2.5D: chunk l q + r of the batch group), then
  // features chunk s (of the row group); as region ops, so an input that requires grad gets the
  // whole gradient back.
  const Tensor mine = parallel::tensor::scatter_to_region(x, 0, grid_.batch_group());
  return proj()->forward(parallel::tensor::scatter_to_region(patches(mine), -1, grid_.row));
}

}  // namespace tessera::nn
