// The 2D layout for model code (see split_2d.h).
#include "models/nn/parallel/split_2d.h"

#include "core/error.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

Split2D::Split2D(const BuildContext& ctx) {
  if (ctx.tensor_2d()) grid_ = ctx.summa_grid();
}

int64_t Split2D::batch(const Tensor& block) const {
  TS_CHECK(block.defined() && block.dim() >= 1, "Split2D", "expected a block (B / q, ...), got ",
           block.defined() ? block.describe() : "undefined");
  return block.size(0) * grid_.batch_parts();
}

int64_t Split2D::batch_padding(int64_t b) const {
  const int64_t parts = grid_.batch_parts();
  return (parts - b % parts) % parts;
}

Tensor Split2D::features(const Tensor& x) const {
  if (!on()) return x;
  return parallel::tensor::scatter_to_region(
      parallel::tensor::copy_to_region(x, grid_.batch_group()), -1, grid_.row);
}

}  // namespace tessera::nn
