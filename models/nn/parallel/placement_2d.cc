// 2D parameter placements (see placement_2d.h).
#include "models/nn/parallel/placement_2d.h"

#include <utility>

#include "autograd/ops.h"
#include "core/error.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

using parallel::tensor::Placement;
using parallel::tensor::SummaGrid;

namespace {

// `shape` (or `view`) cut along `by_col` over the row group (2d_row; chunk: this rank's grid
// column) and along `by_row` over the column group (2d_col; chunk: its grid row); the same dim
// twice nests (column, then row). Repeated over the depth layers under 2.5D.
Placement grid_split(const Shape& shape, int64_t by_col, int64_t by_row, const SummaGrid& grid,
                     const Shape& view = {}) {
  const int q = grid.q();
  Placement p = parallel::tensor::split(shape, by_col, q, grid.grid_col(), grid.row->name(), view);
  Shape rest = p.view_shape();
  rest[by_col] /= q;  // what the second split cuts when it nests
  TS_ASSERT(rest[by_row] % q == 0);
  p.splits.push_back(
      {.dim = by_row, .parts = q, .index = grid.grid_row(), .group = grid.col->name()});
  return over_depth(std::move(p), grid);
}

}  // namespace

Placement weight_placement_2d(const Shape& shape, const SummaGrid& grid, const char* op,
                              int64_t fused_blocks) {
  const int q = grid.q();
  const int64_t k = fused_blocks;
  TS_CHECK(shape.size() == 2 && k >= 1 && shape[0] % (k * q) == 0 && shape[1] % q == 0, op,
           "expected a weight ", shape_str(shape),
           " whose both dims divide by the 2D grid side q = ", q,
           k > 1 ? str_cat(" (its ", k, " fused blocks of ", shape[0] / k, " rows each)") : "");
  if (k == 1) return grid_split(shape, 0, 1, grid);
  return grid_split(shape, 1, 2, grid, {k, shape[0] / k, shape[1]});
}

Placement vector_placement_2d(int64_t n, const SummaGrid& grid, const char* op,
                              int64_t fused_blocks) {
  const int q = grid.q();
  const int64_t k = fused_blocks;
  TS_CHECK(k >= 1 && n % (k * q * q) == 0, op, "expected ", n,
           " features divisible by q^2 = ", q * q,
           k > 1 ? str_cat(" in each of ", k, " fused blocks") : "",
           " (a vector parameter is cut over the ", q, " x ", q, " grid)");
  if (k == 1) return grid_split({n}, 0, 0, grid);
  return grid_split({n}, 1, 1, grid, {k, n / k});
}

Placement columns_placement_2d(const Shape& shape, const SummaGrid& grid, const char* op) {
  const int q = grid.q();
  TS_CHECK(shape.size() == 2 && shape[1] % (int64_t(q) * q) == 0, op, "expected ",
           shape.size() == 2 ? shape[1] : 0, " features (the columns of ", shape_str(shape),
           ") divisible by q^2 = ", q * q, " (they are cut over the ", q, " x ", q, " grid)");
  return grid_split(shape, 1, 1, grid);
}

Placement over_depth(Placement p, const SummaGrid& grid) {
  if (grid.depth() > 1)
    p.replicas.push_back(
        {.group = grid.dep->name(), .parts = grid.depth(), .index = grid.depth_index()});
  return p;
}

// The depth sum comes first in forward order, so backward sums the reduce-scattered (smallest)
// gradient over the depth layers.
Tensor gather_vector_2d(const Tensor& shard, const SummaGrid& grid, int64_t fused_blocks) {
  const Tensor mine = parallel::tensor::depth_replica(shard, grid);
  if (fused_blocks == 1) return parallel::tensor::all_gather_to_region(mine, 0, grid.col);
  const int64_t k = fused_blocks;
  Tensor blocks = parallel::tensor::all_gather_to_region(reshape(mine, {k, mine.size(0) / k}), 1,
                                                         grid.col);  // (k, n / (k q))
  return reshape(blocks, {blocks.numel()});
}

Tensor gather_columns_2d(const Tensor& shard, const SummaGrid& grid) {
  return parallel::tensor::all_gather_to_region(parallel::tensor::depth_replica(shard, grid), 1,
                                                grid.col);
}

DropoutChunk dropout_chunk_2d(const SummaGrid& grid) {
  return {.dim = -1,
          .parts = grid.q(),
          .index = grid.grid_col(),
          .batch_parts = grid.batch_parts(),
          .batch_index = grid.batch_index()};
}

}  // namespace tessera::nn
