// 2D tensor-parallel LayerNorm (see layer_norm_2d.h).
#include "models/nn/parallel/layer_norm_2d.h"

#include "autograd/ops.h"
#include "models/nn/parallel/placement_2d.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {
namespace {

using parallel::tensor::Placement;
using parallel::tensor::SummaGrid;

// The sum over `group` of x, whose gradient is also summed over the group: forward all-reduce
// (reduce_from_region), backward all-reduce (copy_to_region).
Tensor sum_over(const Tensor& x, const parallel::tensor::CommPtr& group) {
  return parallel::tensor::reduce_from_region(parallel::tensor::copy_to_region(x, group), group);
}

Placement parameter_placement(const LayerNormSpec& spec, const SummaGrid& grid) {
  return spec.affine ? vector_placement_2d(spec.dim, grid, "LayerNorm2D") : Placement{};
}

}  // namespace

LayerNorm2D::LayerNorm2D(const LayerNormSpec& spec, const BuildContext& ctx)
    : LayerNorm2D(spec, ctx.summa_grid(), parameter_placement(spec, ctx.summa_grid())) {}

LayerNorm2D::LayerNorm2D(const LayerNormSpec& spec, const SummaGrid& grid,
                         const Placement& placement)
    : LayerNorm(spec, spec.affine ? ones(placement.local_shape()) : Tensor(), placement,
                spec.affine && spec.bias ? zeros(placement.local_shape()) : Tensor(), placement),
      grid_(grid) {
  TS_CHECK(spec.dim % grid.q() == 0, "LayerNorm2D", "expected dim ", spec.dim,
           " divisible by the 2D grid side q = ", grid.q());
  TS_CHECK(!spec.grad_group, "LayerNorm2D",
           "expected no sequence-parallel grad_group under 2D tensor parallelism");
}

Tensor LayerNorm2D::forward(const Tensor& x) {
  const int64_t local = spec().dim / grid_.q();
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local, type_name(),
           "expected this rank's 2D block (B / q, ..., ", local, ") of an input with ", spec().dim,
           " features, got ", x.defined() ? x.describe() : "undefined");
  const int64_t last = x.dim() - 1;
  const double n = double(spec().dim);
  auto row_mean = [&](const Tensor& t) {
    return div(sum_over(sum(t, {last}, /*keepdim=*/true), grid_.row), n);  // (B / q, ..., 1)
  };
  const Tensor centered = sub(x, row_mean(x));
  Tensor y = mul(centered, rsqrt(add(row_mean(square(centered)), spec().eps)));
  if (weight().defined()) y = mul(y, gather_vector_2d(weight(), grid_));
  if (bias().defined()) y = add(y, gather_vector_2d(bias(), grid_));
  return y;
}

}  // namespace tessera::nn
