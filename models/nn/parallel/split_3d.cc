// The 3D layout for model code (see split_3d.h).
#include "models/nn/parallel/split_3d.h"

#include "core/error.h"
#include "models/nn/parallel/linear_3d.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

parallel::tensor::Placement features_placement_3d(const Shape& shape,
                                                  const parallel::tensor::CubeCoords& at,
                                                  const char* op) {
  const int q = at.q;
  const int64_t q3 = int64_t(q) * q * q;
  TS_CHECK(!shape.empty() && shape.back() % q3 == 0, op, "expected a parameter ", shape_str(shape),
           " whose last dim divides by q^3 = ", q3, " (the 3D cube side q = ", q, ")");
  const int64_t last = int64_t(shape.size()) - 1;
  parallel::tensor::Placement p = parallel::tensor::split(shape, last, q, at.k, "3d_output");
  p.splits.push_back({.dim = last, .parts = q, .index = at.j, .group = "3d_input"});
  p.splits.push_back({.dim = last, .parts = q, .index = at.i, .group = "3d_weight"});
  return p;
}

Split3D::Split3D(const BuildContext& ctx) {
  if (ctx.tensor_3d()) cube_ = ctx.cube("Split3D");
}

int64_t Split3D::batch(const Tensor& piece) const {
  TS_CHECK(piece.defined() && piece.dim() >= 1, "Split3D", "expected a piece (B / q, ...), got ",
           piece.defined() ? piece.describe() : "undefined");
  return piece.size(0) * q();
}

parallel::tensor::Placement Split3D::features_placement(const Shape& shape, const char* op) const {
  if (!on()) return parallel::tensor::replicated(shape);
  return features_placement_3d(shape, cube_.coords(), op);
}

Tensor Split3D::features(const Tensor& shard) const {
  if (!on()) return shard;
  return parallel::tensor::all_gather_to_region(shard, -1, cube_.weight);
}

}  // namespace tessera::nn
