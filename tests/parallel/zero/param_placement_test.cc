// Stage 3's parameter chunks and their placement decisions (parallel/zero/param_placement.h). The
// chunks under training, with their device and host bytes: tests/tools/cli/zero_test.sh.
#include "parallel/zero/param_placement.h"

#include <catch2/catch.hpp>

#include "core/error.h"

using namespace tessera;
using namespace tessera::parallel::zero;

namespace {

std::vector<ShardPiece> pieces(const std::vector<int64_t>& sizes, int64_t start = 0) {
  std::vector<ShardPiece> out;
  int64_t at = start;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back({.param = i, .param_offset = 0, .shard_offset = at, .numel = sizes[i]});
    at += sizes[i];
  }
  return out;
}

}  // namespace

TEST_CASE("chunks are runs of whole pieces up to the capacity", "[zero][placement]") {
  const std::vector<ChunkRange> c = pack_chunks(pieces({3, 4, 2, 9, 1, 1}), 8);
  REQUIRE(c.size() == 4);
  CHECK((c[0].begin == 0 && c[0].numel == 7));   // 3 + 4; the 2 would make 9
  CHECK((c[1].begin == 7 && c[1].numel == 2));   // the 9 does not fit beside it
  CHECK((c[2].begin == 9 && c[2].numel == 9));   // above the capacity: alone
  CHECK((c[3].begin == 18 && c[3].numel == 2));  // 1 + 1
}

TEST_CASE("a piece above the capacity is a chunk of its own; empty pieces are skipped",
          "[zero][placement]") {
  const std::vector<ChunkRange> c = pack_chunks(pieces({2, 0, 10, 3}), 4);
  REQUIRE(c.size() == 3);
  CHECK((c[0].begin == 0 && c[0].numel == 2));
  CHECK((c[1].begin == 2 && c[1].numel == 10));
  CHECK((c[2].begin == 12 && c[2].numel == 3));
  // Every element of every piece is in exactly one chunk.
  int64_t covered = 0;
  for (const ChunkRange& r : c) covered += r.numel;
  CHECK(covered == 15);
  CHECK_THROWS_WITH(pack_chunks(pieces({1}), 0), Catch::Contains("chunk capacity of at least 1"));
}

TEST_CASE("the chunk capacity is searched to waste least, as Gemini's chunk size",
          "[zero][placement]") {
  // Pieces 5, 4, 3: capacity 5 packs [5] [4] [3] (waste 0 + 1 + 2), 7 packs [5] [4 3] (2), 12 one
  // chunk (0).
  CHECK(search_chunk_capacity(pieces({5, 4, 3}), 1, 12, 1) == 12);
  // Up to 10: 7 (waste 2) beats 5 (3), 8 (4), 6 and 9 (6) and 10 (8).
  CHECK(search_chunk_capacity(pieces({5, 4, 3}), 1, 10, 1) == 7);
  // In steps of 4 from the longest piece: 5, 9 and the range's end 10.
  CHECK(search_chunk_capacity(pieces({5, 4, 3}), 1, 10, 4) == 5);
  // A piece longer than the range is a chunk of its own and does not raise the start; ties go to
  // the smaller capacity (2 and 4 both waste nothing).
  CHECK(search_chunk_capacity(pieces({100, 2, 2}), 1, 10, 1) == 2);
  // A piece beyond the mean + 3 standard deviations (40 among ten 2s: mean 5.5, deviation 10.9)
  // stands alone too, inside the range.
  CHECK(search_chunk_capacity(pieces({2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 40}), 1, 64, 1) == 2);
  CHECK(search_chunk_capacity(pieces({2, 2, 40}), 1, 64, 1) == 44);  // not beyond: one chunk
  // The range's lower end holds: 3 packs [2] [2] (waste 2), 4 packs [2 2] (0).
  CHECK(search_chunk_capacity(pieces({2, 2}), 3, 8, 1) == 4);
  CHECK_THROWS_WITH(search_chunk_capacity(pieces({1}), 0, 4, 1),
                    Catch::Contains("expected a chunk capacity range 1 <= min <= max"));
  CHECK_THROWS_WITH(search_chunk_capacity(pieces({1}), 5, 4, 1), Catch::Contains("got [5, 4]"));
  CHECK_THROWS_WITH(search_chunk_capacity(pieces({1}), 1, 4, 0),
                    Catch::Contains("in steps of 0"));
}

TEST_CASE("the static placement puts the last fraction of the chunks on the host",
          "[zero][placement]") {
  CHECK(static_host_chunks(4, 1.0) == std::vector<bool>{true, true, true, true});
  CHECK(static_host_chunks(4, 0.0) == std::vector<bool>{false, false, false, false});
  CHECK(static_host_chunks(4, 0.5) == std::vector<bool>{false, false, true, true});
  CHECK(static_host_chunks(3, 0.34) == std::vector<bool>{false, false, true});
  CHECK(static_host_chunks(0, 0.5).empty());
  CHECK_THROWS_WITH(static_host_chunks(2, 1.5), Catch::Contains("host fraction in [0, 1]"));
}

TEST_CASE("the auto placement keeps the chunks read first while they fit", "[zero][placement]") {
  // Chunk 2 is read first, then 0, then 3; chunk 1 is never read.
  const std::vector<size_t> first_use = {5, SIZE_MAX, 1, 9};
  const std::vector<int64_t> bytes = {40, 10, 30, 20};
  CHECK(auto_device_chunks(first_use, bytes, 100) == std::vector<bool>{true, true, true, true});
  CHECK(auto_device_chunks(first_use, bytes, 70) == std::vector<bool>{true, false, true, false});
  // 30 + 20 fit, 40 does not: it is skipped and the later, smaller ones still go.
  CHECK(auto_device_chunks(first_use, bytes, 55) == std::vector<bool>{false, false, true, true});
  CHECK(auto_device_chunks(first_use, bytes, 0) == std::vector<bool>{false, false, false, false});
}

// A step that reads chunk 0 at positions 0 and 5, chunk 1 at 1 and 4, chunk 2 at 2 and 3 (a
// forward, then its backward in reverse), chunk 3 never; 10 bytes each, a record of 6.
ChunkSchedule mirrored() {
  return ChunkSchedule({{0, 5}, {1, 4}, {2, 3}, {}}, {10, 10, 10, 10}, 6);
}

TEST_CASE("in-step eviction drops the copy read latest, wrapping into the next step",
          "[zero][placement]") {
  const ChunkSchedule s = mirrored();
  CHECK(s.until_read(0, 0) == 5);
  CHECK(s.until_read(0, 5) == 1);  // position 0 of the next step
  CHECK(s.until_read(2, 2) == 1);
  CHECK(s.until_read(3, 0) == SIZE_MAX);
  std::vector<bool> on = {true, true, true, true};
  s.fit(2, 20, on);  // after position 2: chunk 3 (never read), then chunk 0 (read at 5)
  CHECK(on == std::vector<bool>{false, true, true, false});
  s.fit(2, 0, on);
  CHECK(on == std::vector<bool>{false, false, false, false});
}

TEST_CASE("in-step eviction keeps what a gather reads when it fits, before copies read later",
          "[zero][placement]") {
  const ChunkSchedule s = mirrored();
  std::vector<bool> on = {false, false, false, false};
  s.step(0, {0}, 20, on);  // room: chunk 0 is kept
  CHECK(on == std::vector<bool>{true, false, false, false});
  s.step(1, {1}, 20, on);
  CHECK(on == std::vector<bool>{true, true, false, false});
  // Full at position 2: chunk 2 is read next at 3, chunk 0 at 5 and chunk 1 at 4, so chunk 0 goes.
  s.step(2, {2}, 20, on);
  CHECK(on == std::vector<bool>{false, true, true, false});
  // The budget shrinks to one copy at position 3. Chunk 2, read now, is next read in the next
  // step (at 2 + 6), after chunk 1 (at 4): chunk 2 goes, and reading it now does not bring it
  // back, since that would evict chunk 1, read sooner.
  s.step(3, {2}, 10, on);
  CHECK(on == std::vector<bool>{false, true, false, false});
  // At position 5 chunk 0 is next read at 6, chunk 1 at 7: chunk 1 makes room for it.
  s.step(5, {0}, 10, on);
  CHECK(on == std::vector<bool>{true, false, false, false});
  // At 1, chunk 1 is next read at 4 and chunk 0 at 5: chunk 0 makes room.
  s.step(1, {1}, 10, on);
  CHECK(on == std::vector<bool>{false, true, false, false});
  // A chunk read after every copy held stays home: chunk 2, read at 2, keeps its place.
  on = {false, false, true, false};
  s.step(1, {1}, 10, on);
  CHECK(on == std::vector<bool>{false, false, true, false});
  // Over budget on entry (the step's peak is near): evicted first, then nothing fits.
  on = {true, true, true, false};
  s.step(2, {2}, 0, on);
  CHECK(on == std::vector<bool>{false, false, false, false});
  CHECK(s.device_bytes({true, false, true, true}) == 30);
  CHECK_THROWS_WITH(ChunkSchedule({{3, 1}}, {10}, 6), Catch::Contains("ascending read positions"));
}

TEST_CASE("device memory limits read as sizes", "[zero][placement]") {
  CHECK(parse_bytes("8G", "k") == int64_t(8) << 30);
  CHECK(parse_bytes("512M", "k") == int64_t(512) << 20);
  CHECK(parse_bytes("1.5KiB", "k") == 1536);
  CHECK(parse_bytes("4096", "k") == 4096);
  for (const char* bad : {"", "G", "8Q", "-1M", "0", "1.2.3M"})
    CHECK_THROWS_WITH(parse_bytes(bad, "zero.device_memory_limit"),
                      Catch::Contains("zero.device_memory_limit: expected a size"));
}
