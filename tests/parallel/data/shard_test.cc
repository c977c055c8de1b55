// shard_range: slices tile the batch in rank order with sizes differing by at most one.
#include "parallel/data/shard.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using tessera::parallel::shard_range;

TEST_CASE("shard_range splits evenly divisible batches into equal slices") {
  for (int r = 0; r < 4; ++r) {
    auto s = shard_range(24, r, 4);
    CHECK(s.begin == 6 * r);
    CHECK(s.end == 6 * r + 6);
    CHECK(s.size() == 6);
  }
}

TEST_CASE("shard_range tiles uneven batches, extra items to the first ranks") {
  for (int64_t global : {0, 1, 5, 7, 10, 13}) {
    for (int world : {1, 2, 3, 4, 8}) {
      int64_t expect_begin = 0;
      for (int r = 0; r < world; ++r) {
        auto s = shard_range(global, r, world);
        CHECK(s.begin == expect_begin);
        CHECK(s.size() == global / world + (r < global % world ? 1 : 0));
        expect_begin = s.end;
      }
      CHECK(expect_begin == global);
    }
  }
  auto s = shard_range(10, 1, 4);  // sizes 3, 3, 2, 2
  CHECK(s.begin == 3);
  CHECK(s.end == 6);
}

TEST_CASE("shard_range rejects bad arguments") {
  CHECK_THROWS_AS(shard_range(8, 0, 0), tessera::ValueError);
  CHECK_THROWS_AS(shard_range(8, 4, 4), tessera::ValueError);
  CHECK_THROWS_AS(shard_range(8, -1, 4), tessera::ValueError);
  CHECK_THROWS_WITH(shard_range(-1, 0, 4), Catch::Contains("non-negative global batch"));
}
