// Block partitions: the uniform rule written out, the parameter-balanced split against brute force,
// explicit lists and the JSON form.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>

#include "core/error.h"
#include "parallel/pipeline/partition.h"

using namespace tessera;
using namespace tessera::parallel::pipeline;

namespace {

std::vector<int64_t> sizes(const std::vector<BlockRange>& ranges) {
  std::vector<int64_t> out;
  int64_t next = 0;
  for (const BlockRange& r : ranges) {
    CHECK(r.begin == next);  // contiguous, in order, from block 0
    next = r.end;
    out.push_back(r.size());
  }
  return out;
}

// The spec a config names ("uniform", "parameters"), parsed as the config reader does.
PartitionSpec method(const std::string& m) { return PartitionSpec::from_json(m); }

std::vector<int64_t> stage_costs(const std::vector<int64_t>& sizes,
                                 const std::vector<int64_t>& params, int64_t first, int64_t last) {
  std::vector<int64_t> out;
  size_t b = 0;
  for (int64_t n : sizes) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += params[b++];
    out.push_back(c);
  }
  out.front() += first;
  out.back() += last;
  return out;
}

// Every composition of `blocks` into `stages` positive parts.
void compositions(int64_t blocks, int stages, std::vector<int64_t>& cur,
                  const std::function<void(const std::vector<int64_t>&)>& f) {
  if (stages == 1) {
    cur.push_back(blocks);
    f(cur);
    cur.pop_back();
    return;
  }
  for (int64_t n = 1; n <= blocks - (stages - 1); ++n) {
    cur.push_back(n);
    compositions(blocks - n, stages - 1, cur, f);
    cur.pop_back();
  }
}

using V = std::vector<int64_t>;

}  // namespace

TEST_CASE("uniform: stages differ by at most a block, the ends (last first) take the fewer") {
  const PartitionSpec u = method("uniform");
  CHECK(sizes(partition_blocks(u, 8, 4)) == V{2, 2, 2, 2});
  CHECK(sizes(partition_blocks(u, 7, 3)) == V{2, 3, 2});
  CHECK(sizes(partition_blocks(u, 8, 3)) == V{3, 3, 2});  // one light stage: the head's
  CHECK(sizes(partition_blocks(u, 9, 4)) == V{2, 3, 2, 2});
  CHECK(sizes(partition_blocks(u, 10, 4)) == V{2, 3, 3, 2});
  CHECK(sizes(partition_blocks(u, 11, 4)) == V{3, 3, 3, 2});
  CHECK(sizes(partition_blocks(u, 32, 5)) == V{6, 7, 7, 6, 6});
  CHECK(sizes(partition_blocks(u, 5, 1)) == V{5});
  CHECK(sizes(partition_blocks(u, 4, 4)) == V{1, 1, 1, 1});
  CHECK(partition_blocks(u, 7, 3)[1] == BlockRange{2, 5});
  for (int64_t n = 1; n <= 30; ++n)
    for (int s = 1; s <= n; ++s) {
      const V got = sizes(partition_blocks(u, n, s));
      const auto [lo, hi] = std::minmax_element(got.begin(), got.end());
      CHECK(*hi - *lo <= 1);
      CHECK(got.back() == *lo);                       // the last is always among the lighter
      if (n % s != s - 1) CHECK(got.front() == *lo);  // the first too, unless only one is lighter
    }
}

TEST_CASE("parameters: the smallest largest stage, then the most even split") {
  const PartitionSpec p = method("parameters");
  // Equal blocks, embeddings and head worth 1.5 blocks each: the ends take fewer blocks.
  const V hundred(8, 100);
  CHECK(sizes(partition_blocks(p, 8, 3, hundred, 150, 150)) == V{2, 4, 2});     // 350 400 350
  CHECK(sizes(partition_blocks(p, 8, 4, hundred, 150, 150)) == V{1, 3, 3, 1});  // 250 300 300 250
  CHECK(sizes(partition_blocks(p, 8, 4, hundred, 0, 300)) == V{2, 3, 2, 1});    // 200 300 200 400
  CHECK(sizes(partition_blocks(p, 6, 3, {1, 1, 1, 10, 1, 1})) == V{3, 1, 2});
  CHECK(sizes(partition_blocks(p, 3, 1, {5, 6, 7}, 10, 20)) == V{3});
  // Equal blocks without extras split exactly as uniform does.
  for (int64_t n = 1; n <= 24; ++n)
    for (int s = 1; s <= n; ++s)
      CHECK(sizes(partition_blocks(p, n, s, V(size_t(n), 7))) ==
            sizes(partition_blocks(method("uniform"), n, s)));
}

TEST_CASE("parameters agrees with brute force on the largest stage and the evenness") {
  uint64_t seed = 12345;
  const auto next = [&seed]() {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return int64_t((seed >> 33) % 1000);
  };
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = 1 + trial % 10;
    const int s = 1 + int(next() % n);
    V params;
    for (int64_t i = 0; i < n; ++i) params.push_back(next());
    const int64_t first = next() % 3 == 0 ? next() : 0, last = next() % 2 == 0 ? next() * 2 : 0;
    INFO("n " << n << " stages " << s << " first " << first << " last " << last);
    int64_t best_max = INT64_MAX, best_squares = INT64_MAX;
    V cur;
    compositions(n, s, cur, [&](const V& c) {
      const V costs = stage_costs(c, params, first, last);
      const int64_t mx = *std::max_element(costs.begin(), costs.end());
      int64_t sq = 0;
      for (int64_t x : costs) sq += x * x;
      if (mx < best_max || (mx == best_max && sq < best_squares)) {
        best_max = mx;
        best_squares = sq;
      }
    });
    const V costs =
        stage_costs(sizes(partition_blocks(method("parameters"), n, s, params, first, last)),
                    params, first, last);
    int64_t sq = 0;
    for (int64_t x : costs) sq += x * x;
    CHECK(*std::max_element(costs.begin(), costs.end()) == best_max);
    CHECK(sq == best_squares);
  }
}

TEST_CASE("explicit counts are checked against the stages and blocks") {
  PartitionSpec e = PartitionSpec::from_json(nlohmann::json::array({3, 4, 4, 3}));
  CHECK(e.method == PartitionMethod::explicit_counts);
  CHECK(sizes(partition_blocks(e, 14, 4)) == V{3, 4, 4, 3});
  CHECK(partition_blocks(e, 14, 4)[3] == BlockRange{11, 14});
  CHECK_THROWS_WITH(partition_blocks(e, 14, 3),
                    Catch::Contains("expected 3 block counts (one per pipeline stage), got 4"));
  CHECK_THROWS_WITH(
      partition_blocks(e, 16, 4),
      Catch::Contains("expected block counts summing to the model's 16 blocks, got 14"));
  e.counts = {3, 0, 4, 7};
  CHECK_THROWS_WITH(partition_blocks(e, 14, 4),
                    Catch::Contains("at least 1 block, got 0 for stage 1"));
}

TEST_CASE("partition errors name the numbers") {
  CHECK_THROWS_AS(partition_blocks(method("uniform"), 4, 6), ValueError);
  CHECK_THROWS_WITH(partition_blocks(method("uniform"), 4, 6),
                    Catch::Contains("expected at most 4 pipeline stages for 4 blocks, got 6"));
  CHECK_THROWS_WITH(partition_blocks(method("parameters"), 4, 6, V(4, 1)),
                    Catch::Contains("expected at most 4 pipeline stages for 4 blocks, got 6"));
  CHECK_THROWS_WITH(partition_blocks(method("uniform"), 4, 0),
                    Catch::Contains("expected at least 1 pipeline stage, got 0"));
  CHECK_THROWS_WITH(partition_blocks(method("parameters"), 4, 2, V(3, 1)),
                    Catch::Contains("expected 4 block parameter counts, got 3"));
  CHECK_THROWS_WITH(partition_blocks(method("parameters"), 2, 2, V{1, -1}),
                    Catch::Contains("expected parameter counts >= 0, got -1 for block 1"));
  CHECK_THROWS_WITH(method("layers"),
                    Catch::Contains("\"uniform\", \"parameters\" or a list of blocks per stage"));
}

TEST_CASE("partition JSON: a name or a list, alone or under \"partition\"") {
  using J = nlohmann::json;
  CHECK(PartitionSpec::from_json("uniform").method == PartitionMethod::uniform);
  CHECK(PartitionSpec::from_json("parameters").method == PartitionMethod::parameters);
  CHECK(PartitionSpec::from_json(J{{"partition", "parameters"}}).method ==
        PartitionMethod::parameters);
  CHECK(PartitionSpec::from_json(J{{"partition", {1, 2}}}).counts == V{1, 2});
  for (const J& j : {J("uniform"), J("parameters"), J::array({3, 4, 4, 3})})
    CHECK(PartitionSpec::from_json(j).to_json() == j);
  for (const J& j : {J("even"), J("explicit"), J(3), J{{"partition", "even"}}, J{{"size", 2}}})
    CHECK_THROWS_WITH(PartitionSpec::from_json(j),
                      Catch::Contains("\"uniform\", \"parameters\" or a list of blocks per stage"));
  CHECK_THROWS_WITH(PartitionSpec::from_json(J::array({1, "a"})),
                    Catch::Contains("to hold block counts (integers), got [1,\"a\"]"));
}
