// 3D tensor-parallel LayerNorm (see layer_norm_3d.h).
#include "models/nn/parallel/layer_norm_3d.h"

#include "autograd/ops.h"
#include "core/factory.h"
#include "models/nn/parallel/linear_3d.h"
#include "parallel/tensor/placement_3d.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {
namespace {

using parallel::tensor::Cube3D;
using parallel::tensor::Placement;

// The sum over `group` of x, whose gradient is also summed over the group: forward all-reduce
// (reduce_from_region), backward all-reduce (copy_to_region).
Tensor sum_over(const Tensor& x, const parallel::tensor::CommPtr& group) {
  return parallel::tensor::reduce_from_region(parallel::tensor::copy_to_region(x, group), group);
}

Placement parameter_placement(const LayerNormSpec& spec, const Cube3D& cube) {
  if (!spec.affine) return Placement{};
  return parallel::tensor::vector_placement_3d(spec.dim, cube.coords(), "LayerNorm3D");
}

}  // namespace

LayerNorm3D::LayerNorm3D(const LayerNormSpec& spec, const BuildContext& ctx)
    : LayerNorm3D(spec, ctx.cube("LayerNorm3D"),
                  parameter_placement(spec, ctx.cube("LayerNorm3D"))) {}

LayerNorm3D::LayerNorm3D(const LayerNormSpec& spec, const Cube3D& cube, const Placement& placement)
    : LayerNorm(spec, spec.affine ? ones(placement.local_shape()) : Tensor(), placement,
                spec.affine && spec.bias ? zeros(placement.local_shape()) : Tensor(), placement),
      cube_(cube) {
  const int64_t q = cube.q();
  TS_CHECK(spec.dim % (q * q) == 0, "LayerNorm3D", "expected dim ", spec.dim,
           " divisible by q^2 = ", q * q, " (the 3D cube side q = ", q, ")");
  TS_CHECK(!spec.grad_group, "LayerNorm3D",
           "expected no sequence-parallel grad_group under 3D tensor parallelism");
}

Tensor LayerNorm3D::forward(const Tensor& x) {
  const int64_t q = cube_.q(), local = spec().dim / (q * q);
  TS_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == local, type_name(),
           "expected this rank's 3D piece (B / q, ..., ", local, ") of an input with ", spec().dim,
           " features, got ", x.defined() ? x.describe() : "undefined");
  const int64_t last = x.dim() - 1;
  const double n = double(spec().dim);
  auto plane_mean = [&](const Tensor& t) {  // (B / q, ..., 1)
    const Tensor partial = sum(t, {last}, /*keepdim=*/true);
    return div(sum_over(sum_over(partial, cube_.input), cube_.output), n);
  };
  const Tensor centered = sub(x, plane_mean(x));
  Tensor y = mul(centered, rsqrt(add(plane_mean(square(centered)), spec().eps)));
  if (weight().defined()) y = mul(y, parallel::tensor::gather_vector_3d(weight(), cube_));
  if (bias().defined()) y = add(y, parallel::tensor::gather_vector_3d(bias(), cube_));
  return y;
}

}  // namespace tessera::nn
