// Token datasets: windows and shifted targets, seeded order, sharding, and exact mid-epoch resume.
#include "models/data/token_dataset.h"

#include <catch2/catch.hpp>
#include <set>

#include "core/error.h"
#include "tests/models/data/data_test_util.h"

using namespace tessera;
using namespace tessera::data;
using tessera::data::testing::ScratchDir;

namespace {

// Token i of the file is i % 1000 (vocab 1000), so a window's start is readable from its tokens.
std::string make_file(const ScratchDir& dir, int64_t count) {
  const std::string path = dir.file("ds.tok");
  TokenFileWriter w(path, 1000);
  std::vector<uint32_t> ids(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) ids[size_t(i)] = uint32_t(i % 1000);
  w.append(ids);
  w.finish();
  return path;
}

std::vector<int64_t> row(const Tensor& t, int64_t b) {
  const int64_t T = t.size(1);
  const int64_t* p = t.data<int64_t>() + b * T;
  return std::vector<int64_t>(p, p + T);
}

std::vector<std::vector<int64_t>> rows(const Tensor& t) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = 0; b < t.size(0); ++b) out.push_back(row(t, b));
  return out;
}

}  // namespace

TEST_CASE("token dataset: windows tile the file and targets are inputs shifted by one",
          "[dataset]") {
  ScratchDir dir;
  const std::string path = make_file(dir, 101);
  TokenDataset ds(path, {.context = 8, .shuffle = false});
  CHECK(ds.num_windows() == 12);  // starts 0, 8, ..., 88; the last needs tokens 88..96
  const TokenBatch b = ds.next_batch(3);
  CHECK(b.input.shape() == Shape{3, 8});
  CHECK(b.target.shape() == Shape{3, 8});
  CHECK(b.input.dtype() == DType::i64);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < 8; ++t) {
      REQUIRE(row(b.input, r)[size_t(t)] == r * 8 + t);
      REQUIRE(row(b.target, r)[size_t(t)] == r * 8 + t + 1);
    }
  }
  TokenDataset strided(path, {.context = 8, .stride = 3, .shuffle = false});
  CHECK(strided.num_windows() == (101 - 9) / 3 + 1);
  std::vector<int64_t> w(9);
  strided.read_window(2, w);
  CHECK(w.front() == 6);
  CHECK(w.back() == 14);
}

TEST_CASE("token dataset: seeded order is reproducible and differs between epochs", "[dataset]") {
  ScratchDir dir;
  const std::string path = make_file(dir, 4 * 50 + 1);  // 50 windows of T = 4
  const auto epoch_starts = [&](uint64_t seed) {
    TokenDataset ds(path, {.context = 4, .shuffle = true, .seed = seed});
    std::vector<std::vector<int64_t>> epochs(2);
    for (auto& e : epochs) {
      for (int i = 0; i < 5; ++i) {
        const TokenBatch b = ds.next_batch(10);
        for (int64_t r = 0; r < 10; ++r) {
          const std::vector<int64_t> in = row(b.input, r), tgt = row(b.target, r);
          REQUIRE(in[0] % 4 == 0);
          for (size_t t = 0; t + 1 < in.size(); ++t) REQUIRE(tgt[t] == in[t + 1]);
          e.push_back(in[0] / 4);
        }
      }
    }
    return epochs;
  };
  const auto a = epoch_starts(11), b = epoch_starts(11), c = epoch_starts(12);
  CHECK(a == b);
  CHECK(a[0] != a[1]);
  CHECK(a[0] != c[0]);
  CHECK(std::set<int64_t>(a[0].begin(), a[0].end()).size() == 50);
  CHECK(std::set<int64_t>(a[1].begin(), a[1].end()).size() == 50);
}

TEST_CASE("token dataset: ranks see disjoint windows covering the global batch", "[dataset]") {
  ScratchDir dir;
  const std::string path = make_file(dir, 8 * 40 + 1);
  TokenDataset whole(path, {.context = 8, .seed = 3});
  std::vector<TokenDataset> ranks;
  for (int64_t r = 0; r < 4; ++r)
    ranks.emplace_back(path,
                       TokenDatasetOptions{.context = 8, .seed = 3, .rank = r, .world_size = 4});
  std::set<std::vector<int64_t>> seen;
  for (int step = 0; step < 5; ++step) {  // 5 global batches of 8 = one epoch of 40 windows
    const auto global = rows(whole.next_batch(8).input);
    std::vector<std::vector<int64_t>> joined;
    for (auto& ds : ranks) {
      const auto local = rows(ds.next_batch(2).input);
      joined.insert(joined.end(), local.begin(), local.end());
    }
    REQUIRE(joined == global);
    for (const auto& r : joined) REQUIRE(seen.insert(r).second);
  }
  CHECK(seen.size() == 40);
}

TEST_CASE("token dataset: resume mid-epoch gives the identical batch sequence", "[dataset]") {
  ScratchDir dir;
  const std::string path = make_file(dir, 5000);
  const TokenDatasetOptions opts{.context = 16, .seed = 77};
  TokenDataset run(path, opts);
  for (int i = 0; i < 40; ++i) run.next_batch(7);  // 280 of 312 windows: late in epoch 0
  const std::string saved = run.position().to_json().dump();
  TokenDataset resumed(path, opts);
  resumed.set_position(DataPosition::from_json(nlohmann::json::parse(saved)));
  for (int i = 0; i < 20; ++i) {  // across the epoch boundary
    const TokenBatch x = run.next_batch(7), y = resumed.next_batch(7);
    REQUIRE(rows(x.input) == rows(y.input));
    REQUIRE(rows(x.target) == rows(y.target));
  }
  CHECK(run.position().epoch == 1);
}

TEST_CASE("token dataset: bad options and short files are errors", "[dataset]") {
  ScratchDir dir;
  const std::string path = make_file(dir, 10);
  REQUIRE_THROWS_WITH(TokenDataset(path, {.context = 10}),
                      Catch::Contains("at least context + 1 = 11 tokens") && Catch::Contains(path));
  REQUIRE_THROWS_WITH(TokenDataset(path, {.context = 0}), Catch::Contains("context >= 1"));
  REQUIRE_THROWS_WITH(TokenDataset(dir.file("none.tok"), {.context = 4}),
                      Catch::Contains("none.tok"));
  TokenDataset ds(path, {.context = 4});
  REQUIRE_THROWS_WITH(ds.set_position({0, 2}), Catch::Contains("index in [0, 2)"));
}
