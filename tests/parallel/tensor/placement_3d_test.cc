// The 3D placements without ranks (parallel/tensor/placement_3d.h): for every rank of cubes of side
// 2 and 3, the shard cut_shard takes holds exactly the serial elements linear_3d expects (weight
// rows chunks k' q + j for every k', columns chunk k q + i; vector chunk (k q + j) q + i; fused
// blocks each cut so), the shards of all ranks cover the serial tensor once, and shapes that do
// not split are refused naming the numbers. The products and gathers run under mpirun
// (tests/models/nn/parallel/tp_3d_ranks.cc).
#include "parallel/tensor/placement_3d.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "parallel/tensor/placement_ops.h"

using namespace tessera;
using tessera::parallel::tensor::CubeCoords;
using tessera::parallel::tensor::cut_shard;
using tessera::parallel::tensor::Placement;
using tessera::parallel::tensor::vector_placement_3d;
using tessera::parallel::tensor::weight_placement_3d;

namespace {

std::vector<CubeCoords> every_rank(int q) {
  std::vector<CubeCoords> out;
  for (int k = 0; k < q; ++k)
    for (int j = 0; j < q; ++j)
      for (int i = 0; i < q; ++i) out.push_back({.q = q, .i = i, .j = j, .k = k});
  return out;
}

// 0, 1, 2, ... in `shape`: an element's value is its serial flat index.
Tensor indices(const Shape& shape) {
  return arange(0, double(shape_numel(shape)), 1.0, {.dtype = DType::f32}).reshape(shape);
}

}  // namespace

TEST_CASE("3D weight shards hold the rows and columns linear_3d expects", "[parallel][placement]") {
  for (int q : {2, 3}) {
    for (int64_t f : {1, 3}) {
      const int64_t out = 2 * f * q * q, in = 3 * q * q;  // 2 rows per block and chunk, 3 columns
      const Tensor full = indices({out, in});
      std::vector<int> seen(size_t(out * in), 0);
      for (const CubeCoords& at : every_rank(q)) {
        const Placement p = weight_placement_3d({out, in}, at, "test", f);
        REQUIRE(p.local_shape() == Shape{out / q, in / (q * q)});
        const Tensor shard = cut_shard(full, p);
        const int64_t rows = out / (f * q * q), cols = in / (q * q);
        // Local row r: block b, chunk k' (of the block's q^2), row within the chunk.
        for (int64_t r = 0; r < shard.size(0); ++r) {
          const int64_t b = r / (q * rows), kk = (r / rows) % q, within = r % rows;
          const int64_t serial_row = b * (out / f) + (kk * q + at.j) * rows + within;
          for (int64_t c = 0; c < shard.size(1); ++c) {
            const int64_t serial_col = (int64_t(at.k) * q + at.i) * cols + c;
            const int64_t index = serial_row * in + serial_col;
            CHECK(shard.data<float>()[r * shard.size(1) + c] == float(index));
            ++seen[size_t(index)];
          }
        }
      }
      for (int n : seen) REQUIRE(n == 1);
    }
  }
}

TEST_CASE("3D vector shards are chunk (k q + j) q + i of each block", "[parallel][placement]") {
  for (int q : {2, 3}) {
    for (int64_t f : {1, 3}) {
      const int64_t n = 2 * f * q * q * q, per = n / (f * q * q * q);
      const Tensor full = indices({n});
      std::vector<int> seen(size_t(n), 0);
      for (const CubeCoords& at : every_rank(q)) {
        const Placement p = vector_placement_3d(n, at, "test", f);
        REQUIRE(p.local_shape() == Shape{n / (q * q * q)});
        const Tensor shard = cut_shard(full, p);
        const int64_t chunk = (int64_t(at.feature_chunk()) * q + at.i);
        for (int64_t e = 0; e < shard.numel(); ++e) {
          const int64_t index = (e / per) * (n / f) + chunk * per + e % per;
          CHECK(shard.data<float>()[e] == float(index));
          ++seen[size_t(index)];
        }
      }
      for (int s : seen) REQUIRE(s == 1);
    }
  }
}

TEST_CASE("3D placements refuse shapes that do not split over the cube", "[parallel][placement]") {
  const CubeCoords at{.q = 2};
  CHECK_THROWS_WITH(weight_placement_3d({8, 6}, at, "Linear3D"), Catch::Contains("[Linear3D]") &&
                                                                     Catch::Contains("(8, 6)") &&
                                                                     Catch::Contains("q^2 = 4"));
  CHECK_THROWS_WITH(weight_placement_3d({12, 4}, at, "Linear3D", 2),
                    Catch::Contains("2 fused blocks of 6"));
  CHECK_THROWS_WITH(vector_placement_3d(12, at, "LayerNorm3D"),
                    Catch::Contains("[LayerNorm3D]") && Catch::Contains("12 features") &&
                        Catch::Contains("q^3 = 8"));
}
