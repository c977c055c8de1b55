// Sharded checkpoint directories: per-rank piece files, the merged index, reads by intersection
// (see piece_checkpoint.h).
#include "models/io/piece_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/factory.h"
#include "models/io/atomic_file.h"
#include "models/io/checkpoint.h"
#include "models/io/safetensors.h"

namespace tessera::io {
namespace {

constexpr const char* kOp = "checkpoint";
constexpr const char* kIndexFormat = "tessera-pieces";
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

std::string rank_file(int rank, const char* ext) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "pieces-%05d.%s", rank, ext);
  return buf;
}

std::string trimmed(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

json box_json(const PieceBox& b) {
  const Shape shape = b.box_shape();
  return {{"view", b.view_shape()},
          {"offsets", b.offsets.empty() ? std::vector<int64_t>(shape.size(), 0) : b.offsets},
          {"shape", shape},
          {"range", {b.begin, b.range_end()}}};
}

template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  TS_CHECK(j.is_object() && j.contains(key), kOp, where, ": expected \"", key, "\"");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    TS_FAIL(kOp, where, ": \"", key, "\" is malformed: ", e.what());
  }
}

// One tensor's index entry, its pieces' runs computed and checked to tile the global shape.
StoredTensor parse_tensor(const std::string& name, const json& j, const std::string& where) {
  const std::string at = str_cat(where, ": tensor '", name, "'");
  StoredTensor t;
  t.dtype = field<std::string>(j, "dtype", at);
  t.shape = field<Shape>(j, "shape", at);
  TS_CHECK(safetensors_to_dtype(t.dtype).has_value(), kOp, at, ": unknown dtype ", t.dtype);
  TS_CHECK(j.contains("pieces") && j["pieces"].is_array(), kOp, at, ": expected a \"pieces\" list");
  struct Span {
    int64_t begin, end;
    size_t piece;
  };
  std::vector<Span> spans;
  for (size_t i = 0; i < j["pieces"].size(); ++i) {
    const json& p = j["pieces"][i];
    const std::string pat = str_cat(at, ": piece ", i);
    StoredPiece s;
    s.file = field<std::string>(p, "file", pat);
    s.key = field<std::string>(p, "key", pat);
    s.checksum = field<std::string>(p, "checksum", pat);
    TS_CHECK(!s.file.empty() && s.file.find('/') == std::string::npos && s.file != "..", kOp, pat,
             ": expected a file name inside the checkpoint, got '", s.file, "'");
    const auto range = field<std::vector<int64_t>>(p, "range", pat);
    TS_CHECK(range.size() == 2, kOp, pat, ": expected \"range\": [begin, end]");
    s.box = PieceBox{.global = t.shape,
                     .view = field<Shape>(p, "view", pat),
                     .offsets = field<std::vector<int64_t>>(p, "offsets", pat),
                     .shape = field<Shape>(p, "shape", pat),
                     .begin = range[0],
                     .end = range[1]};
    try {
      s.runs = piece_runs(s.box, "box");
    } catch (const Error& e) {
      TS_FAIL(kOp, s.describe(i).insert(0, at + ": "), ": ", e.what());
    }
    for (const Run& r : s.runs) spans.push_back({r.global, r.global + r.length, i});
    t.pieces.push_back(std::move(s));
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  const int64_t numel = shape_numel(t.shape);
  int64_t covered = 0;
  for (const Span& s : spans) {
    TS_CHECK(s.begin >= covered, kOp, at, ": ", t.pieces[s.piece].describe(s.piece),
             " overlaps another piece at element ", s.begin, " (two ranks stored it)");
    TS_CHECK(s.begin == covered, kOp, at, ": no piece holds elements [", covered, ", ", s.begin,
             ") of its ", numel, " (global shape ", shape_str(t.shape), ")");
    covered = s.end;
  }
  TS_CHECK(covered == numel, kOp, at, ": no piece holds elements [", covered, ", ", numel,
           ") of its ", numel, " (global shape ", shape_str(t.shape), ")");
  return t;
}

json read_json(const std::string& path) {
  TS_CHECK(fs::exists(path), kOp, path, ": file is missing (not a complete checkpoint)");
  try {
    return json::parse(read_file(path, kOp));
  } catch (const json::exception& e) {
    TS_FAIL(kOp, path, ": not valid JSON: ", e.what());
  }
}

}  // namespace

std::string StoredPiece::describe(size_t i) const {
  return str_cat("piece ", i, " (key '", key, "', ", box.describe(), ") in file ", file);
}

std::string piece_temp_dir(const std::string& dir) { return trimmed(dir) + ".tmp-pieces"; }

void begin_piece_directory(const std::string& dir) {
  const std::string tmp = piece_temp_dir(dir);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  TS_CHECK(!ec, kOp, tmp, ": cannot remove an interrupted save: ", ec.message());
  fs::create_directories(tmp, ec);
  TS_CHECK(!ec, kOp, tmp, ": cannot create directory: ", ec.message());
}

void write_rank_pieces(const std::string& dir, int rank, const std::vector<PieceWrite>& pieces,
                       const json& extra) {
  const std::string tmp = piece_temp_dir(dir);
  const std::string file = rank_file(rank, "safetensors");
  NamedTensors stored;
  json tensors = json::object();
  for (const PieceWrite& p : pieces) {
    const std::string what = str_cat("tensor '", p.name, "' (", p.box.describe(), ")");
    const std::vector<Run> runs = piece_runs(p.box, what);
    TS_CHECK(p.local.defined() && p.local.numel() == p.box.range_numel(), kOp, what, ": expected ",
             p.box.range_numel(), " local elements, got ",
             p.local.defined() ? p.local.describe() : "none");
    Tensor local = p.local.to(kCPU).contiguous().reshape({p.local.numel()});
    Tensor data = local;
    if (stored_numel(runs) != local.numel()) {  // padding to drop
      data = empty({stored_numel(runs)}, {.dtype = local.dtype()});
      pack_runs(local.data_ptr(), runs, data.data_ptr(), local.itemsize());
    }
    TS_CHECK(!tensors.contains(p.name), kOp, what, ": rank ", rank, " stores it twice");
    json piece = box_json(p.box);
    piece["file"] = file;
    piece["key"] = p.name;
    piece["checksum"] = checksum_hex(data.data_ptr(), size_t(data.numel()) * data.itemsize());
    tensors[p.name] = {
        {"dtype", safetensors_dtype_name(data.dtype())}, {"shape", p.box.global}, {"piece", piece}};
    stored.emplace_back(p.name, data);
  }
  json desc = {{"rank", rank}, {"tensors", tensors}, {"extra", extra}};
  if (!stored.empty()) {
    const std::string path = join(tmp, file);
    save_safetensors(path, stored);
    const std::string bytes = read_file(path, kOp);  // hot in the page cache
    desc["file"] = {{"name", file},
                    {"bytes", bytes.size()},
                    {"checksum", checksum_hex(bytes.data(), bytes.size())}};
  }
  write_file_atomic(join(tmp, rank_file(rank, "json")), desc.dump());
}

std::vector<json> merge_rank_pieces(const std::string& dir, int ranks) {
  const std::string tmp = piece_temp_dir(dir);
  json files = json::object(), tensors = json::object();
  std::vector<json> extras;
  for (int r = 0; r < ranks; ++r) {
    const std::string path = join(tmp, rank_file(r, "json"));
    const json desc = read_json(path);
    TS_CHECK(desc.is_object() && desc.value("rank", -1) == r && desc.contains("tensors"), kOp, path,
             ": expected rank ", r, "'s piece descriptors");
    if (desc.contains("file")) {
      json f = desc["file"];
      const std::string name = f.at("name").get<std::string>();
      f.erase("name");
      f["rank"] = r;
      files[name] = f;
    }
    for (const auto& [name, t] : desc["tensors"].items()) {
      json& entry = tensors[name];
      if (entry.is_null())
        entry = {{"dtype", t["dtype"]}, {"shape", t["shape"]}, {"pieces", json::array()}};
      TS_CHECK(entry["dtype"] == t["dtype"] && entry["shape"] == t["shape"], kOp, path,
               ": tensor '", name, "': rank ", r, " stores it as ", t["dtype"].dump(), " ",
               t["shape"].dump(), ", another rank as ", entry["dtype"].dump(), " ",
               entry["shape"].dump());
      entry["pieces"].push_back(t["piece"]);
    }
    extras.push_back(desc.value("extra", json::object()));
  }
  json index = {{"format", kIndexFormat}, {"version", 1}, {"files", files}, {"tensors", tensors}};
  check_index(index, join(tmp, kPieceIndexFile));
  write_file_atomic(join(tmp, kPieceIndexFile), index.dump(1) + "\n");
  for (int r = 0; r < ranks; ++r) fs::remove(join(tmp, rank_file(r, "json")));
  return extras;
}

void commit_piece_directory(const std::string& dir, const json& state) {
  const std::string tmp = piece_temp_dir(dir);
  json top = {{"format", "tessera-checkpoint"},
              {"version", 1},
              {"state", state},
              {"index", kPieceIndexFile}};
  write_file_atomic(join(tmp, "state.json"), top.dump(2) + "\n");
  fsync_directory(tmp);
  commit_directory(tmp, trimmed(dir), kOp);
}

void abandon_piece_directory(const std::string& dir) noexcept {
  std::error_code ec;
  fs::remove_all(piece_temp_dir(dir), ec);
}

void check_index(const json& index, const std::string& where) {
  TS_CHECK(index.is_object() && index.value("format", "") == kIndexFormat &&
               index.value("version", 0) == 1,
           kOp, where, ": expected \"format\": \"", kIndexFormat, "\", version 1");
  TS_CHECK(index.contains("tensors") && index["tensors"].is_object() && index.contains("files") &&
               index["files"].is_object(),
           kOp, where, ": expected \"files\" and \"tensors\" objects");
  for (const auto& [name, t] : index["tensors"].items()) {
    const StoredTensor st = parse_tensor(name, t, where);
    for (size_t i = 0; i < st.pieces.size(); ++i)
      TS_CHECK(index["files"].contains(st.pieces[i].file), kOp, where, ": tensor '", name,
               "': ", st.pieces[i].describe(i), ": the index lists no such file");
  }
}

// Open files and verified pieces, filled on demand (reads are logically const).
struct PieceReader::Cache {
  std::map<std::string, SafetensorsFile> files;
  std::map<std::pair<std::string, size_t>, Tensor> pieces;
};

PieceReader PieceReader::open(const std::string& dir) {
  PieceReader r;
  r.dir_ = dir;
  const std::string where = join(dir, kPieceIndexFile);
  const json index = read_json(where);
  check_index(index, where);
  r.files_ = index["files"];
  for (const auto& [name, t] : index["tensors"].items())
    r.tensors_.emplace(name, parse_tensor(name, t, where));
  r.cache_ = std::make_shared<Cache>();
  return r;
}

std::vector<std::string> PieceReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

const StoredTensor& PieceReader::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  TS_CHECK(it != tensors_.end(), kOp, dir_, ": tensor '", name, "' is not in the checkpoint");
  return it->second;
}

const Tensor& PieceReader::piece_data(const std::string& name, size_t i) const {
  auto key = std::make_pair(name, i);
  if (auto it = cache_->pieces.find(key); it != cache_->pieces.end()) return it->second;
  const StoredTensor& t = tensor(name);
  const StoredPiece& p = t.pieces[i];
  const std::string path = join(dir_, p.file);
  auto check = [&](bool ok, const auto&... why) {
    TS_CHECK(ok, kOp, dir_, ": tensor '", name, "': ", p.describe(i), ": ", why...);
  };
  auto f = cache_->files.find(p.file);
  if (f == cache_->files.end()) {
    check(fs::exists(path), "the file is missing");
    const uint64_t want = files_.at(p.file).value("bytes", uint64_t(0));
    const uint64_t got = fs::file_size(path);
    check(got == want, "the file is ", got, " bytes, the index says ", want,
          got < want ? " (truncated)" : "");
    try {
      f = cache_->files.emplace(p.file, SafetensorsFile::open(path)).first;
    } catch (const std::exception& e) {
      check(false, e.what());
    }
  }
  check(f->second.contains(p.key), "the file holds no key '", p.key, "'");
  const TensorInfo& info = f->second.info(p.key);
  const Shape want_shape{stored_numel(p.runs)};
  check(info.dtype == t.dtype && info.shape == want_shape, "stored as ", info.dtype, " ",
        shape_str(info.shape), ", the index says ", t.dtype, " ", shape_str(want_shape));
  Tensor data = f->second.get(p.key);
  const std::string sum = checksum_hex(data.data_ptr(), size_t(data.numel()) * data.itemsize());
  check(sum == p.checksum, "checksum ", sum, " differs from the index's ", p.checksum,
        " (the data is corrupt)");
  return cache_->pieces.emplace(key, data).first->second;
}

Tensor PieceReader::read(const std::string& name, const PieceBox& target) const {
  const StoredTensor& t = tensor(name);
  TS_CHECK(target.global == t.shape, kOp, dir_, ": tensor '", name,
           "': the checkpoint's global shape ", shape_str(t.shape), " differs from this model's ",
           shape_str(target.global));
  const std::vector<Run> want = piece_runs(target, str_cat("tensor '", name, "' target"));
  Tensor out = zeros({target.range_numel()}, {.dtype = *safetensors_to_dtype(t.dtype)});
  if (want.empty()) return out;
  const int64_t lo = want.front().global, hi = want.back().global + want.back().length;
  int64_t copied = 0;
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    const std::vector<Run>& runs = t.pieces[i].runs;
    if (runs.empty() || runs.front().global >= hi || runs.back().global + runs.back().length <= lo)
      continue;  // a piece this target does not meet is never opened
    const Tensor& data = piece_data(name, i);
    copied += copy_runs(data.data_ptr(), runs, out.data_ptr(), want, out.itemsize());
  }
  TS_CHECK(copied == stored_numel(want), kOp, dir_, ": tensor '", name, "': its pieces hold ",
           copied, " of the ", stored_numel(want), " elements of ", target.describe());
  return out;
}

Tensor PieceReader::read_full(const std::string& name) const {
  const StoredTensor& t = tensor(name);
  return read(name, whole(t.shape)).reshape(t.shape);
}

std::vector<std::string> PieceReader::verify_all() const {
  std::vector<std::string> problems;
  for (const auto& [file, f] : files_.items()) {
    const std::string path = join(dir_, file);
    if (!fs::exists(path)) {
      problems.push_back(str_cat(path, ": the file is missing"));
      continue;
    }
    const std::string bytes = read_file(path, kOp);
    const std::string sum = checksum_hex(bytes.data(), bytes.size());
    if (bytes.size() != f.value("bytes", uint64_t(0)) || sum != f.value("checksum", ""))
      problems.push_back(str_cat(path, ": ", bytes.size(), " bytes with checksum ", sum,
                                 ", the index says ", f.value("bytes", uint64_t(0)),
                                 " bytes with checksum ", f.value("checksum", "")));
  }
  for (const auto& [name, t] : tensors_) {
    for (size_t i = 0; i < t.pieces.size(); ++i) {
      try {
        piece_data(name, i);
      } catch (const Error& e) {
        problems.push_back(e.what());
      }
    }
  }
  return problems;
}

bool is_piece_checkpoint(const std::string& dir) {
  const std::string path = join(dir, "state.json");
  if (!fs::exists(path)) return false;
  try {
    const json s = json::parse(read_file(path, kOp));
    return s.is_object() && s.contains("index");
  } catch (const json::exception&) {
    return false;
  }
}

}  // namespace tessera::io
