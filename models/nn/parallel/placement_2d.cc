// 2D parameter placements (see placement_2d.h).
#include "models/nn/parallel/placement_2d.h"

#include "core/error.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::nn {

using parallel::tensor::Placement;
using parallel::tensor::SummaGrid;

namespace {

// `shape` (or `view`) cut along `by_col` over 2d_row (chunk: this rank's grid column) and along
// `by_row` over 2d_col (chunk: its grid row).
Placement grid_split(const Shape& shape, int64_t by_col, int64_t by_row, const SummaGrid& grid,
                     const Shape& view = {}) {
  const int q = grid.q();
  Placement p = parallel::tensor::split(shape, by_col, q, grid.grid_col(), "2d_row", view);
  p.splits.push_back(
      parallel::tensor::split(shape, by_row, q, grid.grid_row(), "2d_col", view).splits[0]);
  return p;
}

}  // namespace

Placement weight_placement_2d(const Shape& shape, const SummaGrid& grid, const char* op) {
  const int q = grid.q();
  TS_CHECK(shape.size() == 2 && shape[0] % q == 0 && shape[1] % q == 0, op, "expected a weight ",
           shape_str(shape), " whose both dims divide by the 2D grid side q = ", q);
  return grid_split(shape, 0, 1, grid);
}

Placement vector_placement_2d(int64_t n, const SummaGrid& grid, const char* op) {
  const int q = grid.q();
  TS_CHECK(n % (int64_t(q) * q) == 0, op, "expected ", n, " features divisible by q^2 = ", q * q,
           " (a vector parameter is cut over the ", q, " x ", q, " grid)");
  return grid_split({n}, 0, 1, grid, {q, q, n / (int64_t(q) * q)});
}

Tensor gather_vector_2d(const Tensor& shard, const SummaGrid& grid) {
  return parallel::tensor::all_gather_to_region(shard, 0, grid.col);
}

}  // namespace tessera::nn
