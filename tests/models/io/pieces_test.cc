// Sharded checkpoints' piece arithmetic and reshard: a tensor written as several layouts would
// (1d splits, 2d grid boxes, a padded vocabulary view, a regrouped q|k|v view, ZeRO flat ranges of
// a split) reads back under every other layout equal exactly to the full tensor's slices, computed
// here independently with narrow / reshape; and damage is refused naming tensor, piece and file.
#include "models/io/pieces.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "core/factory.h"
#include "models/io/checkpoint.h"
#include "models/io/piece_checkpoint.h"
#include "tests/models/io/io_test_util.h"

using namespace tessera;
using namespace tessera::io;
using namespace tessera::io::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// 0, 1, 2, ... so every element says where it came from.
Tensor iota(const Shape& shape) {
  Tensor t = empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i);
  return t;
}

// The piece's local tensor cut from `full` with tensor ops: regrouped or zero-padded to the view,
// narrowed to the box, flattened, narrowed to the range.
Tensor expected_local(const Tensor& full, const PieceBox& b) {
  const Shape& v = b.view_shape();
  Tensor in_view;
  if (shape_numel(v) == full.numel()) {
    in_view = full.contiguous().reshape(v);
  } else {
    in_view = zeros(v);
    Tensor region = in_view;
    for (size_t d = 0; d < v.size(); ++d) region = region.narrow(int64_t(d), 0, full.shape()[d]);
    region.copy_(full);
  }
  const Shape shape = b.box_shape();
  for (size_t d = 0; d < shape.size(); ++d)
    in_view = in_view.narrow(int64_t(d), b.offsets.empty() ? 0 : b.offsets[d], shape[d]);
  return in_view.contiguous()
      .reshape({b.box_numel()})
      .narrow(0, b.begin, b.range_numel())
      .contiguous();
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.data<float>()[i] != b.data<float>()[i]) return false;
  return true;
}

PieceBox box(const Shape& global, const Shape& view, std::vector<int64_t> offsets, Shape shape,
             int64_t begin = 0, int64_t end = -1) {
  return PieceBox{.global = global,
                  .view = view,
                  .offsets = offsets,
                  .shape = shape,
                  .begin = begin,
                  .end = end};
}

// Boxes of `view` split along dim 0 into a, dim 1 into b (2d grid; a or b = 1: a 1d split).
std::vector<PieceBox> grid(const Shape& global, const Shape& view_or_empty, int a, int b) {
  std::vector<PieceBox> out;
  const Shape& view = view_or_empty.empty() ? global : view_or_empty;
  const int64_t r = view[0] / a, c = view[1] / b;
  for (int i = 0; i < a; ++i)
    for (int j = 0; j < b; ++j) {
      std::vector<int64_t> off(view.size(), 0);
      Shape sh = view;
      off[0] = i * r, off[1] = j * c, sh[0] = r, sh[1] = c;
      out.push_back(box(global, view_or_empty, off, sh));
    }
  return out;
}

// Each box cut into `parts` flat ranges (the last shorter), as ZeRO shards a flat buffer.
std::vector<PieceBox> flat_ranges(const std::vector<PieceBox>& boxes, int parts) {
  std::vector<PieceBox> out;
  for (const PieceBox& b : boxes) {
    const int64_t n = b.box_numel(), step = (n + parts - 1) / parts;
    for (int64_t lo = 0; lo < n; lo += step) {
      PieceBox p = b;
      p.begin = lo, p.end = std::min(n, lo + step);
      out.push_back(p);
    }
  }
  return out;
}

// A checkpoint where rank i stores pieces[i] of `full` under `name`.
std::string write_layout(const std::string& tag, const std::string& name, const Tensor& full,
                         const std::vector<PieceBox>& pieces) {
  const std::string dir = scratch_dir(tag) + "/step-00000001";
  begin_piece_directory(dir);
  for (size_t i = 0; i < pieces.size(); ++i)
    write_rank_pieces(dir, int(i), {{name, pieces[i], expected_local(full, pieces[i])}});
  merge_rank_pieces(dir, int(pieces.size()));
  commit_piece_directory(dir, json::object());
  return dir;
}

}  // namespace

TEST_CASE("piece runs: a padded view's rows clip to the global extent, a range narrows the box") {
  // (5, 4) padded to (6, 4), the box of rows [3, 6): rows 3 and 4 are real, row 5 padding.
  std::vector<Run> runs = piece_runs(box({5, 4}, {6, 4}, {3, 0}, {3, 4}));
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].global == 12);
  CHECK(runs[0].local == 0);
  CHECK(runs[0].length == 8);
  // Columns [2, 4) of (3, 4), elements [1, 5) of that (3, 2) box: (0,3) (1,2) (1,3) (2,2).
  runs = piece_runs(box({3, 4}, {}, {0, 2}, {3, 2}, 1, 5));
  REQUIRE(runs.size() == 3);
  CHECK((runs[0].global == 3 && runs[0].length == 1 && runs[0].local == 0 && runs[0].stored == 0));
  CHECK((runs[1].global == 6 && runs[1].length == 2 && runs[1].local == 1 && runs[1].stored == 1));
  CHECK((runs[2].global == 10 && runs[2].length == 1 && runs[2].local == 3 && runs[2].stored == 3));
  // A regrouped view keeps the flat order: (12, 4) as (3, 4, 4), dim 1 rows [2, 4).
  runs = piece_runs(box({12, 4}, {3, 4, 4}, {0, 2, 0}, {3, 2, 4}));
  REQUIRE(runs.size() == 3);
  CHECK((runs[1].global == 24 && runs[1].length == 8 && runs[1].local == 8));
  CHECK(stored_numel(runs) == 24);
  CHECK(piece_runs(box({2, 3}, {}, {}, {}, 2, 2)).empty());
  require_throws_with(
      [] {
        piece_runs(box({12, 4}, {5, 4, 4}, {0, 0, 0}, {1, 1, 1}));
      },
      {"neither regroups nor pads"});
  require_throws_with([] { piece_runs(box({4, 4}, {}, {3, 0}, {2, 4})); }, {"outside the view"});
  require_throws_with(
      [] {
        piece_runs(box({4, 4}, {}, {0, 0}, {2, 4}, 3, 9));
      },
      {"element range [3, 9)"});
}

TEST_CASE("reshard: every layout's pieces read back under every other layout exactly") {
  struct Layout {
    const char* what;
    std::vector<PieceBox> pieces;
  };
  // One tensor family per view kind, each written and read under several layouts.
  struct Family {
    const char* name;
    Shape global;
    std::vector<Layout> layouts;
  };
  const Shape w{8, 12}, vocab{10, 4}, qkv{12, 4};
  std::vector<Family> families = {
      {"h.0.mlp.fc.weight",
       w,
       {{"serial", {whole(w)}},
        {"1d rows / 2", grid(w, {}, 2, 1)},
        {"1d columns / 4", grid(w, {}, 1, 4)},
        {"2d grid 2 x 2", grid(w, {}, 2, 2)},
        {"ZeRO dp 3 of 1d columns / 2", flat_ranges(grid(w, {}, 1, 2), 3)},
        {"ZeRO dp 4 of the whole", flat_ranges({whole(w)}, 4)}}},
      {"wte.weight",
       vocab,
       {{"serial", {whole(vocab)}},
        {"vocab padded to 12 / 4", grid(vocab, {12, 4}, 4, 1)},
        {"vocab padded to 12 / 3", grid(vocab, {12, 4}, 3, 1)},
        {"ZeRO dp 2 of padded / 2", flat_ranges(grid(vocab, {12, 4}, 2, 1), 2)},
        {"2d grid of padded 12 x 4", grid(vocab, {12, 4}, 2, 2)}}},
      {"h.0.attn.qkv.weight",
       qkv,
       {{"serial", {whole(qkv)}},
        {"heads / 2 of (3, 4, 4)",
         [&] {
           std::vector<PieceBox> out;
           for (int i = 0; i < 2; ++i) out.push_back(box(qkv, {3, 4, 4}, {0, 2 * i, 0}, {3, 2, 4}));
           return out;
         }()},
        {"rows / 4", grid(qkv, {}, 4, 1)},
        {"ZeRO dp 3 of heads / 2", flat_ranges({box(qkv, {3, 4, 4}, {0, 0, 0}, {3, 2, 4}),
                                                box(qkv, {3, 4, 4}, {0, 2, 0}, {3, 2, 4})},
                                               3)}}},
  };
  int pairs = 0;
  for (const Family& f : families) {
    const Tensor full = iota(f.global);
    for (const Layout& written : f.layouts) {
      const std::string dir = write_layout("pieces", f.name, full, written.pieces);
      const PieceReader reader = PieceReader::open(dir);
      CHECK(same(reader.read_full(f.name), full));
      for (const Layout& read : f.layouts) {
        for (const PieceBox& target : read.pieces) {
          INFO(f.name << ": written " << written.what << ", read " << read.what << ": "
                      << target.describe());
          CHECK(same(reader.read(f.name, target), expected_local(full, target)));
        }
        ++pairs;
      }
      // The serial loader consolidates the pieces too (eval, generate).
      const CheckpointContents ck = load_checkpoint(dir);
      REQUIRE(ck.model.size() == 1);
      CHECK(same(ck.model[0].second, full));
      fs::remove_all(fs::path(dir).parent_path());
    }
  }
  CHECK(pairs == 36 + 25 + 16);
}

TEST_CASE("reshard: a reader opens only the files of the pieces it meets") {
  const Shape w{4, 8};
  const Tensor full = iota(w);
  const std::string dir = write_layout("pieces-only", "w", full, grid(w, {}, 2, 1));
  fs::remove(fs::path(dir) / "pieces-00001.safetensors");  // rows [2, 4)
  const PieceReader reader = PieceReader::open(dir);
  CHECK(same(reader.read("w", grid(w, {}, 2, 2)[1]), expected_local(full, grid(w, {}, 2, 2)[1])));
  require_throws_with([&] { reader.read("w", grid(w, {}, 2, 2)[2]); },
                      {"tensor 'w'", "piece 1", "pieces-00001.safetensors", "missing"});
}

TEST_CASE("sharded checkpoint damage is refused naming the tensor, the piece and the file") {
  const Shape w{4, 8};
  const Tensor full = iota(w);
  auto fresh = [&] { return write_layout("pieces-damage", "h.0.w", full, grid(w, {}, 1, 2)); };

  SECTION("truncated piece file") {
    const std::string dir = fresh();
    const std::string file = dir + "/pieces-00001.safetensors";
    std::string bytes = read_bytes(file);
    write_bytes(file, bytes.substr(0, bytes.size() - 5));
    require_throws_with([&] { load_checkpoint(dir); },
                        {"tensor 'h.0.w'", "piece 1", "pieces-00001.safetensors", "truncated"});
    const std::vector<std::string> problems = PieceReader::open(dir).verify_all();
    REQUIRE(problems.size() == 2);  // the file's checksum, and the piece
  }
  SECTION("corrupt piece bytes") {
    const std::string dir = fresh();
    const std::string file = dir + "/pieces-00000.safetensors";
    std::string bytes = read_bytes(file);
    bytes[bytes.size() - 3] ^= 0x40;
    write_bytes(file, bytes);
    require_throws_with([&] { load_checkpoint(dir); },
                        {"tensor 'h.0.w'", "piece 0", "pieces-00000.safetensors", "checksum"});
  }
  SECTION("missing piece file") {
    const std::string dir = fresh();
    fs::remove(dir + "/pieces-00000.safetensors");
    require_throws_with([&] { PieceReader::open(dir).read_full("h.0.w"); },
                        {"tensor 'h.0.w'", "piece 0", "pieces-00000.safetensors", "missing"});
  }
  SECTION("pieces that do not cover the tensor") {
    const std::string dir = fresh();
    json index = json::parse(read_bytes(dir + "/index.json"));
    index["tensors"]["h.0.w"]["pieces"].erase(1);
    write_bytes(dir + "/index.json", index.dump());
    require_throws_with([&] { PieceReader::open(dir); },
                        {"tensor 'h.0.w'", "no piece holds elements [4, 8) of its 32"});
  }
  SECTION("a piece stored twice") {
    const std::string dir = scratch_dir("pieces-twice") + "/step-00000001";
    begin_piece_directory(dir);
    write_rank_pieces(dir, 0, {{"w", whole(w), full}});
    write_rank_pieces(dir, 1,
                      {{"w", grid(w, {}, 2, 1)[1], expected_local(full, grid(w, {}, 2, 1)[1])}});
    require_throws_with([&] { merge_rank_pieces(dir, 2); },
                        {"tensor 'w'", "piece 1", "pieces-00001.safetensors", "overlaps"});
    abandon_piece_directory(dir);
    CHECK(!fs::exists(piece_temp_dir(dir)));
  }
  SECTION("a mismatched shape") {
    const std::string dir = fresh();
    require_throws_with(
        [&] {
          PieceReader::open(dir).read("h.0.w", whole({8, 4}));
        },
        {"tensor 'h.0.w'", "global shape (4, 8)", "(8, 4)"});
    json index = json::parse(read_bytes(dir + "/index.json"));
    index["tensors"]["h.0.w"]["pieces"][0]["shape"] = {4, 9};
    write_bytes(dir + "/index.json", index.dump());
    require_throws_with(
        [&] { PieceReader::open(dir); },
        {"tensor 'h.0.w'", "piece 0", "pieces-00000.safetensors", "outside the view"});
  }
  SECTION("a rank that wrote nothing") {
    const std::string dir = scratch_dir("pieces-norank") + "/step-00000001";
    begin_piece_directory(dir);
    write_rank_pieces(dir, 0, {{"w", whole(w), full}});
    require_throws_with([&] { merge_rank_pieces(dir, 2); }, {"pieces-00001.json", "missing"});
  }
}
