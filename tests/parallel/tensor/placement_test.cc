// Placement arithmetic without ranks: nested splits of one dimension (2D's vectors and tables,
// each a grid column's chunk cut again by the grid row), padded views, and cut_shard on them. The
// gathers run under mpirun (tests/models/nn/parallel/tp_2d_*_ranks.cc).
#include "parallel/tensor/placement.h"

#include <catch2/catch.hpp>
#include <vector>

#include "autograd/ops.h"
#include "core/factory.h"
#include "parallel/tensor/placement_ops.h"

using namespace tessera;
using tessera::parallel::tensor::cut_shard;
using tessera::parallel::tensor::Placement;
using tessera::parallel::tensor::split;

namespace {

// (n) cut over q x q: chunk `col` of q, then piece `row` of that chunk (placement_2d.h's vector).
Placement nested(int64_t n, int q, int col, int row, const Shape& view = {}) {
  Placement p = split({n}, 0, q, col, "2d_row", view);
  p.splits.push_back({.dim = 0, .parts = q, .index = row, .group = "2d_col"});
  return p;
}

}  // namespace

TEST_CASE("nested splits of one dimension cut the earlier split's chunk", "[parallel][placement]") {
  const Tensor full = arange(0, 12, 1.0, {.dtype = DType::f32});
  for (int col = 0; col < 2; ++col) {
    for (int row = 0; row < 2; ++row) {
      const Placement p = nested(12, 2, col, row);
      CHECK(p.local_shape() == Shape{3});
      CHECK(p.view_offsets() == std::vector<int64_t>{col * 6 + row * 3});
      const Tensor piece = cut_shard(full, p);
      for (int64_t i = 0; i < 3; ++i) CHECK(piece.data<float>()[i] == float(col * 6 + row * 3 + i));
    }
  }
}

TEST_CASE("a nested split of a padded view leaves the padding as zeros", "[parallel][placement]") {
  // 10 ids padded to 12 on a 2 x 2 grid: piece (col 1, row 1) is ids 9 and two padding rows.
  const Tensor full = add(arange(0, 10, 1.0, {.dtype = DType::f32}), 1.0);
  const Placement p = nested(10, 2, 1, 1, {12});
  CHECK(p.padded());
  CHECK(p.local_shape() == Shape{3});
  const Tensor piece = cut_shard(full, p);
  CHECK(piece.data<float>()[0] == 10.0f);
  CHECK(piece.data<float>()[1] == 0.0f);
  CHECK(piece.data<float>()[2] == 0.0f);
}

TEST_CASE("splits of different dimensions give a block", "[parallel][placement]") {
  // (4, 6) cut rows over one group and columns over another: block (row chunk 1, column chunk 2).
  const Tensor full = arange(0, 24, 1.0, {.dtype = DType::f32}).reshape({4, 6});
  Placement p = split({4, 6}, 0, 2, 1, "a");
  p.splits.push_back({.dim = 1, .parts = 3, .index = 2, .group = "b"});
  CHECK(p.local_shape() == Shape{2, 2});
  CHECK(p.view_offsets() == std::vector<int64_t>{2, 4});
  const Tensor piece = cut_shard(full, p).contiguous();
  CHECK(piece.data<float>()[0] == 16.0f);
  CHECK(piece.data<float>()[3] == 23.0f);
}

TEST_CASE("a shard repeated over a replica group counts once and cuts as without it",
          "[parallel][placement]") {
  const Tensor full = arange(0, 12, 1.0, {.dtype = DType::f32});
  for (int depth = 0; depth < 2; ++depth) {
    Placement p = nested(12, 2, 1, 0);
    p.replicas.push_back({.group = "2.5d_dep", .parts = 2, .index = depth});
    CHECK(p.copies() == 2);
    CHECK(p.counted_copy() == (depth == 0));  // the global norm reads depth 0's copy
    CHECK(p.describe() ==
          "sharded (12) dim 0 / 2 over 2d_row dim 0 / 2 over 2d_col x 2 copies "
          "over 2.5d_dep");
    // The copy holds the same piece whatever its depth.
    const Tensor piece = cut_shard(full, p);
    for (int64_t i = 0; i < 3; ++i) CHECK(piece.data<float>()[i] == float(6 + i));
  }
  const Placement unique = nested(12, 2, 0, 1);
  CHECK(unique.copies() == 1);
  CHECK(unique.counted_copy());
}
