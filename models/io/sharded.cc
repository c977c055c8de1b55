// Sharded safetensors save and the reader over a single file or an index (see sharded.h).
#include "models/io/sharded.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "models/io/atomic_file.h"

namespace tessera::io {
namespace {

constexpr const char* kOp = "safetensors_index";
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string shard_name(const std::string& prefix, size_t i, size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%05zu-of-%05zu", i, n);
  return prefix + buf + ".safetensors";
}

// "<prefix>-DDDDD-of-DDDDD.safetensors"
bool is_shard_name(const std::string& name, const std::string& prefix) {
  const std::string tail = ".safetensors";
  const size_t digits = 5 + 4 + 5;  // "00001-of-00003"
  if (name.size() != prefix.size() + 1 + digits + tail.size()) return false;
  if (name.compare(0, prefix.size(), prefix) != 0 || name[prefix.size()] != '-') return false;
  if (name.compare(name.size() - tail.size(), tail.size(), tail) != 0) return false;
  std::string mid = name.substr(prefix.size() + 1, digits);
  for (size_t i = 0; i < mid.size(); ++i) {
    bool ok = (i >= 5 && i < 9) ? mid[i] == "-of-"[i - 5] : (mid[i] >= '0' && mid[i] <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

}  // namespace

std::string save_sharded(const std::string& dir, const NamedTensors& tensors,
                         const ShardOptions& options) {
  TS_CHECK(options.max_shard_bytes > 0, kOp, "expected max_shard_bytes > 0, got 0");
  TS_CHECK(!options.prefix.empty() && options.prefix.find('/') == std::string::npos, kOp,
           "expected a plain file name prefix, got '", options.prefix, "'");
  std::error_code ec;
  fs::create_directories(dir, ec);
  TS_CHECK(!ec, kOp, dir, ": cannot create directory: ", ec.message());
  // Validates names (unique, not reserved) once for the whole set.
  validate_tensor_names(tensors, join(dir, options.prefix + ".safetensors.index.json"));

  std::vector<NamedTensors> shards;
  uint64_t current = 0, total = 0;
  for (const auto& entry : tensors) {
    uint64_t nbytes = uint64_t(entry.second.numel()) * entry.second.itemsize();
    if (shards.empty() || (current > 0 && current + nbytes > options.max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(entry);
    current += nbytes;
    total += nbytes;
  }
  if (shards.empty()) shards.emplace_back();  // an empty model still has one (empty) shard

  json weight_map = json::object();
  std::set<std::string> written;
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string name = shard_name(options.prefix, i + 1, shards.size());
    save_safetensors(join(dir, name), shards[i], options.metadata);
    for (const auto& entry : shards[i]) weight_map[entry.first] = name;
    written.insert(name);
  }
  json meta = json::object();
  for (const auto& [k, v] : options.metadata) meta[k] = v;
  meta["total_size"] = total;
  json index = {{"metadata", meta}, {"weight_map", weight_map}};
  std::string index_path = join(dir, options.prefix + ".safetensors.index.json");
  write_file_atomic(index_path, index.dump(2) + "\n");

  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (is_shard_name(name, options.prefix) && !written.count(name)) fs::remove(e.path(), ec);
  }
  return index_path;
}

SafetensorsReader SafetensorsReader::open(const std::string& path, const std::string& prefix) {
  SafetensorsReader r;
  r.origin_ = path;
  std::string file = path;
  if (fs::is_directory(path)) {
    std::string index = join(path, prefix + ".safetensors.index.json");
    std::string single = join(path, prefix + ".safetensors");
    if (fs::exists(index)) {
      file = index;
    } else {
      TS_CHECK(fs::exists(single), kOp, path, ": holds neither ", prefix,
               ".safetensors.index.json nor ", prefix, ".safetensors");
      file = single;
    }
  }
  const std::string json_tail = ".json";
  bool is_index = file.size() >= json_tail.size() &&
                  file.compare(file.size() - json_tail.size(), json_tail.size(), json_tail) == 0;
  if (!is_index) {
    r.files_.push_back(SafetensorsFile::open(file));
    for (const std::string& name : r.files_[0].names()) r.where_[name] = 0;
    r.metadata_ = r.files_[0].metadata();
    return r;
  }

  json index;
  try {
    index = json::parse(read_file(file, kOp));
  } catch (const json::exception& e) {
    TS_FAIL(kOp, file, ": not valid JSON: ", e.what());
  }
  TS_CHECK(index.is_object(), kOp, file, ": expected a JSON object, got ", index.type_name());
  TS_CHECK(index.contains("weight_map") && index["weight_map"].is_object(), kOp, file,
           ": expected a \"weight_map\" object of tensor name -> shard file");
  if (index.contains("metadata")) {
    const json& meta = index["metadata"];
    TS_CHECK(meta.is_object(), kOp, file, ": expected \"metadata\" to be an object, got ",
             meta.type_name());
    for (const auto& [k, v] : meta.items())
      r.metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> tensors
  for (const auto& [name, shard] : index["weight_map"].items()) {
    TS_CHECK(shard.is_string(), kOp, file, ": tensor '", name,
             "': expected a shard file name, got ", shard.dump());
    std::string s = shard.get<std::string>();
    TS_CHECK(!s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos, kOp, file,
             ": tensor '", name, "': expected a file name in the index's directory, got '", s, "'");
    by_shard[s].push_back(name);
  }
  std::string dir = parent_directory(file);
  for (const auto& [shard, names] : by_shard) {  // missing files first: the likeliest mistake
    std::string shard_path = join(dir, shard);
    TS_CHECK(fs::exists(shard_path), kOp, file, ": shard ", shard_path, " (holding tensor '",
             names.front(), "'",
             names.size() > 1 ? str_cat(" and ", names.size() - 1, " more") : "", ") is missing");
  }
  for (const auto& [shard, names] : by_shard) {
    std::string shard_path = join(dir, shard);
    r.files_.push_back(SafetensorsFile::open(shard_path));
    const SafetensorsFile& f = r.files_.back();
    std::set<std::string> listed(names.begin(), names.end());
    for (const std::string& name : names) {
      TS_CHECK(f.contains(name), kOp, file, ": tensor '", name, "' is listed in shard ", shard_path,
               ", which does not hold it");
      r.where_[name] = r.files_.size() - 1;
    }
    for (const std::string& name : f.names()) {
      TS_CHECK(listed.count(name), kOp, file, ": shard ", shard_path, " holds tensor '", name,
               "', which the index does not list for it");
    }
  }
  return r;
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : where_) out.push_back(name);
  return out;
}

const SafetensorsFile& SafetensorsReader::file_for(const std::string& name) const {
  auto it = where_.find(name);
  TS_CHECK(it != where_.end(), kOp, origin_, ": no tensor named '", name, "'");
  return files_[it->second];
}

const TensorInfo& SafetensorsReader::info(const std::string& name) const {
  return file_for(name).info(name);
}

Tensor SafetensorsReader::get(const std::string& name) const { return file_for(name).get(name); }

const std::string& SafetensorsReader::file_of(const std::string& name) const {
  return file_for(name).path();
}

NamedTensors SafetensorsReader::load_all() const {
  NamedTensors out;
  for (const auto& [name, i] : where_) out.emplace_back(name, files_[i].get(name));
  return out;
}

NamedTensors load_sharded(const std::string& path, const std::string& prefix) {
  return SafetensorsReader::open(path, prefix).load_all();
}

}  // namespace tessera::io
