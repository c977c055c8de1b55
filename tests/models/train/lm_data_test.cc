// Language-model windows from memory and from a token file: contents, in-range windows, rank
// sharding (2 ranks together read what 1 rank reads) and resumable positions.
#include "models/train/lm_data.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "models/data/token_file.h"
#include "models/train/synthetic_data.h"
#include "tests/testing/temp_dir.h"

using namespace tessera;
using namespace tessera::train;

namespace {

std::vector<int64_t> text_ids(int64_t n) {
  const std::string text = generate_grammar_text(1, n);
  return std::vector<int64_t>(text.begin(), text.end());
}

}  // namespace

TEST_CASE("in-memory windows hold the text, shifted targets, and stay in range") {
  const std::vector<int64_t> ids = text_ids(1 << 16);
  auto src = LmSource::from_tokens(ids, 256, {.context = 64, .shuffle = true, .seed = 1234});
  CHECK(src->num_windows() == ((1 << 16) - 1) / 64);
  for (int step = 0; step < 50; ++step) {
    LmBatch b = src->next(16);
    const int64_t* x = b.input.data<int64_t>();
    const int64_t* y = b.target.data<int64_t>();
    for (int64_t r = 0; r < 16; ++r) {
      // Find the window in the text: it starts at a multiple of 64.
      bool found = false;
      for (int64_t w = 0; w < src->num_windows() && !found; ++w) {
        found = std::equal(x + r * 64, x + r * 64 + 64, ids.begin() + w * 64) &&
                std::equal(y + r * 64, y + r * 64 + 64, ids.begin() + w * 64 + 1);
      }
      REQUIRE(found);
    }
  }
}

TEST_CASE("two ranks together read the windows one rank reads; positions resume") {
  const std::vector<int64_t> ids = text_ids(1 << 14);
  LmSourceOptions o{.context = 32, .shuffle = true, .seed = 9};
  auto one = LmSource::from_tokens(ids, 256, o);
  o.world_size = 2;
  auto r0 = LmSource::from_tokens(ids, 256, o);
  o.rank = 1;
  auto r1 = LmSource::from_tokens(ids, 256, o);
  for (int step = 0; step < 40; ++step) {  // runs over an epoch end (511 windows)
    LmBatch all = one->next(8), a = r0->next(4), b = r1->next(4);
    CHECK(a.first_item == all.first_item);
    CHECK(b.first_item == all.first_item + 4);
    for (int64_t i = 0; i < 4 * 32; ++i) {
      REQUIRE(a.input.data<int64_t>()[i] == all.input.data<int64_t>()[i]);
      REQUIRE(b.input.data<int64_t>()[i] == all.input.data<int64_t>()[4 * 32 + i]);
    }
  }
  const data::DataPosition p = one->position();
  LmBatch next = one->next(8);
  auto again = LmSource::from_tokens(ids, 256, {.context = 32, .shuffle = true, .seed = 9});
  again->set_position(p);
  LmBatch replay = again->next(8);
  for (int64_t i = 0; i < 8 * 32; ++i)
    REQUIRE(replay.input.data<int64_t>()[i] == next.input.data<int64_t>()[i]);
}

TEST_CASE("file windows match in-memory windows of the same tokens") {
  const std::vector<int64_t> ids = text_ids(1 << 14);
  const tessera::testing::TempDir tmp;
  const std::string path = tmp.file("text.tok");
  {
    data::TokenFileWriter w(path, 256);
    std::vector<uint32_t> u(ids.begin(), ids.end());
    w.append(u);
    w.finish();
  }
  auto file = LmSource::from_file(path, {.context = 32, .shuffle = true, .seed = 5});
  auto mem = LmSource::from_tokens(ids, 256, {.context = 32, .shuffle = true, .seed = 5});
  CHECK(file->num_windows() == mem->num_windows());
  CHECK(file->vocab_size() == 256);
  for (int step = 0; step < 10; ++step) {
    LmBatch f = file->next(8), m = mem->next(8);
    for (int64_t i = 0; i < 8 * 32; ++i) {
      REQUIRE(f.input.data<int64_t>()[i] == m.input.data<int64_t>()[i]);
      REQUIRE(f.target.data<int64_t>()[i] == m.target.data<int64_t>()[i]);
    }
  }
}
