// 3D parameter placements (see placement_3d.h).
#include "parallel/tensor/placement_3d.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::parallel::tensor {

Placement weight_placement_3d(const Shape& shape, const CubeCoords& at, const char* op,
                              int64_t fused_blocks) {
  const int64_t q = at.q, f = fused_blocks;
  TS_CHECK(shape.size() == 2 && f >= 1 && shape[0] % (f * q * q) == 0 && shape[1] % (q * q) == 0,
           op, "expected a weight ", shape_str(shape), " whose both dims divide by q^2 = ", q * q,
           " (the 3D cube side q = ", q, ")",
           f > 1 ? str_cat(" (its rows in ", f, " fused blocks of ", shape[0] / f, ")") : "");
  // The output features as (f, k', j, chunk): this rank takes j for every k'.
  const Shape view = f == 1 ? Shape{q, q, shape[0] / (q * q), shape[1]}
                            : Shape{f, q, q, shape[0] / (f * q * q), shape[1]};
  const int64_t rows_j = f == 1 ? 1 : 2, cols = int64_t(view.size()) - 1;
  Placement p = split(shape, rows_j, int(q), at.j, "3d_input", view);
  p.splits.push_back({.dim = cols, .parts = int(q), .index = at.k, .group = "3d_output"});
  p.splits.push_back({.dim = cols, .parts = int(q), .index = at.i, .group = "3d_weight"});
  return p;
}

Placement vector_placement_3d(int64_t n, const CubeCoords& at, const char* op,
                              int64_t fused_blocks) {
  const int64_t q = at.q, f = fused_blocks;
  TS_CHECK(f >= 1 && n % (f * q * q * q) == 0, op, "expected ", n,
           " features divisible by q^3 = ", q * q * q,
           f > 1 ? str_cat(" in each of ", f, " fused blocks") : "",
           " (a vector parameter is cut over the ", q, " x ", q, " x ", q, " cube)");
  const int64_t dim = f == 1 ? 0 : 1;
  Placement p = split({n}, dim, int(q), at.k, "3d_output", f == 1 ? Shape{} : Shape{f, n / f});
  p.splits.push_back({.dim = dim, .parts = int(q), .index = at.j, .group = "3d_input"});
  p.splits.push_back({.dim = dim, .parts = int(q), .index = at.i, .group = "3d_weight"});
  return p;
}

Tensor gather_vector_3d(const Tensor& shard, const Cube3D& cube, int64_t fused_blocks) {
  if (fused_blocks == 1) return all_gather_to_region(shard, 0, cube.weight);
  const int64_t f = fused_blocks;
  const Tensor blocks =
      all_gather_to_region(reshape(shard, {f, shard.size(0) / f}), 1, cube.weight);
  return reshape(blocks, {blocks.numel()});
}

}  // namespace tessera::parallel::tensor
