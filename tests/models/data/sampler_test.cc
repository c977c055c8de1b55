// Sampling order: seeded epoch permutations, sequential order, sharding across ranks, positions.
#include "models/data/sampler.h"

#include <catch2/catch.hpp>
#include <numeric>
#include <set>

#include "core/error.h"

using namespace tessera;
using namespace tessera::data;

TEST_CASE("epoch permutation is a permutation for many sizes", "[sampler]") {
  for (int64_t n : {1, 2, 3, 4, 5, 7, 16, 17, 100, 1000, 4097}) {
    const EpochPermutation perm(n, 42, 3);
    std::vector<int64_t> seen(size_t(n), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = perm(i);
      REQUIRE(v >= 0);
      REQUIRE(v < n);
      ++seen[size_t(v)];
    }
    REQUIRE(std::all_of(seen.begin(), seen.end(), [](int64_t c) { return c == 1; }));
  }
}

TEST_CASE("epoch permutation depends on seed and epoch, and looks shuffled", "[sampler]") {
  const int64_t n = 1000;
  const auto order = [&](uint64_t seed, int64_t epoch) {
    const EpochPermutation perm(n, seed, epoch);
    std::vector<int64_t> v(n);
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = perm(i);
    return v;
  };
  CHECK(order(1, 0) == order(1, 0));
  CHECK(order(1, 0) != order(1, 1));
  CHECK(order(1, 0) != order(2, 0));
  // Few fixed points and no long runs of consecutive items: a real shuffle.
  const std::vector<int64_t> v = order(1, 0);
  int fixed = 0, ascending_steps = 0;
  for (int64_t i = 0; i < n; ++i) {
    fixed += v[size_t(i)] == i;
    if (i > 0) ascending_steps += v[size_t(i)] == v[size_t(i - 1)] + 1;
  }
  CHECK(fixed < 10);
  CHECK(ascending_steps < 10);
}

TEST_CASE("sampler: sequential order and epoch wrap", "[sampler]") {
  Sampler s(5, {.shuffle = false});
  CHECK(s.next(3) == std::vector<int64_t>{0, 1, 2});
  CHECK(s.next(3) == std::vector<int64_t>{3, 4, 0});  // runs on into epoch 1
  CHECK(s.position() == DataPosition{1, 1});
  CHECK(s.next(4) == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(s.position() == DataPosition{2, 0});
}

TEST_CASE("sampler: every epoch visits each item once, in a new order", "[sampler]") {
  const int64_t n = 97;
  Sampler s(n, {.shuffle = true, .seed = 5});
  std::vector<int64_t> stream;
  for (int i = 0; i < 3 * n / 4 + 1; ++i) {
    const std::vector<int64_t> b = s.next(4);
    stream.insert(stream.end(), b.begin(), b.end());
  }
  REQUIRE(stream.size() >= size_t(3 * n));
  std::vector<int64_t> e0(stream.begin(), stream.begin() + n),
      e1(stream.begin() + n, stream.begin() + 2 * n);
  CHECK(e0 != e1);
  for (auto e : {e0, e1}) {
    std::sort(e.begin(), e.end());
    std::vector<int64_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    REQUIRE(e == all);
  }
  // Reproducible from the seed alone.
  Sampler again(n, {.shuffle = true, .seed = 5});
  CHECK(again.next(8) == std::vector<int64_t>(stream.begin(), stream.begin() + 8));
}

TEST_CASE("sampler: ranks take disjoint blocks that together form the global batch", "[sampler]") {
  const int64_t n = 50, world = 4, batch = 3;
  Sampler single(n, {.shuffle = true, .seed = 9});
  std::vector<Sampler> ranks;
  for (int64_t r = 0; r < world; ++r)
    ranks.emplace_back(n,
                       SamplerOptions{.shuffle = true, .seed = 9, .rank = r, .world_size = world});
  for (int step = 0; step < 12; ++step) {  // crosses several epoch ends
    const std::vector<int64_t> global = single.next(batch * world);
    std::vector<int64_t> joined;
    for (auto& s : ranks) {
      const std::vector<int64_t> local = s.next(batch);
      joined.insert(joined.end(), local.begin(), local.end());
    }
    REQUIRE(joined == global);
    for (auto& s : ranks) REQUIRE(s.position() == single.position());
  }
  // Within one epoch the ranks never share an item.
  Sampler a(n, {.seed = 1, .rank = 0, .world_size = 2}),
      b(n, {.seed = 1, .rank = 1, .world_size = 2});
  std::set<int64_t> seen;
  for (int step = 0; step < 5; ++step) {
    for (int64_t v : a.next(5)) REQUIRE(seen.insert(v).second);
    for (int64_t v : b.next(5)) REQUIRE(seen.insert(v).second);
  }
  CHECK(seen.size() == size_t(n));
}

TEST_CASE("sampler: a restored position continues the same stream", "[sampler]") {
  Sampler first(23, {.seed = 4});
  for (int i = 0; i < 7; ++i) first.next(5);  // mid epoch 1
  const nlohmann::json saved = first.position().to_json();
  CHECK(saved == nlohmann::json{{"epoch", 1}, {"index", 12}});
  Sampler resumed(23, {.seed = 4});
  resumed.set_position(DataPosition::from_json(saved));
  for (int i = 0; i < 10; ++i) REQUIRE(resumed.next(5) == first.next(5));
}

TEST_CASE("sampler and positions reject bad input", "[sampler]") {
  REQUIRE_THROWS_WITH(Sampler(0, {}), Catch::Contains("at least one item"));
  REQUIRE_THROWS_WITH(Sampler(5, {.rank = 2, .world_size = 2}),
                      Catch::Contains("rank 2 of world size 2"));
  Sampler s(5, {});
  REQUIRE_THROWS_WITH(s.next(0), Catch::Contains("batch size >= 1"));
  REQUIRE_THROWS_WITH(s.set_position({0, 5}), Catch::Contains("index in [0, 5)"));
  REQUIRE_THROWS_WITH(DataPosition::from_json({{"epoch", 1}}),
                      Catch::Contains("exactly the fields"));
  REQUIRE_THROWS_WITH(DataPosition::from_json({{"epoch", -1}, {"index", 0}}),
                      Catch::Contains("field 'epoch'"));
  REQUIRE_THROWS_WITH(DataPosition::from_json({{"epoch", 0}, {"index", "3"}}),
                      Catch::Contains("field 'index'"));
  REQUIRE_THROWS_AS(DataPosition::from_json(nlohmann::json::array()), ValueError);
}
