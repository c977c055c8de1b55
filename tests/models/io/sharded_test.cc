// Sharded safetensors in the Hugging Face index layout: splitting, index contents, loading
// through a directory, an index or a single file, and every inconsistency as a clear error.
#include "models/io/sharded.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/factory.h"
#include "tests/models/io/io_test_util.h"
#include "tests/testing/compare.h"

using namespace tessera;
using namespace tessera::io;
using namespace tessera::io::testing;
using nlohmann::json;

namespace {

NamedTensors sample() {
  return {
      {"wte.weight", arange(0, 20, 1, {.dtype = DType::f32}).view({5, 4})},  // 80 bytes
      {"ln.bias", full({6}, 0.5, {.dtype = DType::bf16})},                   // 12 bytes
      {"h.0.attn.weight", arange(0, 10, 1, {.dtype = DType::f32})},          // 40 bytes
      {"h.0.mask", from_vector<bool>({true, false}, {2})},                   // 2 bytes
      {"huge", zeros({64}, {})},                                             // 256 bytes
  };
}

ShardOptions limit(uint64_t max_shard_bytes, Metadata metadata = {}) {
  ShardOptions o;
  o.max_shard_bytes = max_shard_bytes;
  o.metadata = std::move(metadata);
  return o;
}

void require_same(const NamedTensors& got, const NamedTensors& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    auto it = std::find_if(got.begin(), got.end(), [&](const auto& e) { return e.first == name; });
    REQUIRE(it != got.end());
    CHECK(it->second.dtype() == t.dtype());
    tessera::testing::require_close(it->second, t, 0, 0);
  }
}

}  // namespace

TEST_CASE("sharded save splits by size and writes a Hugging Face index", "[sharded]") {
  std::string dir = scratch_dir("sharded") + "/ckpt";  // created by the save
  std::string index_path = save_sharded(dir, sample(), limit(100, {{"format", "pt"}}));
  CHECK(index_path == dir + "/model.safetensors.index.json");
  // 80 + 12 | 40 + 2 | 256 (alone: larger than the limit)
  CHECK(list_dir(dir) == std::vector<std::string>{
                             "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                             "model-00003-of-00003.safetensors", "model.safetensors.index.json"});
  json index = json::parse(read_bytes(index_path));
  CHECK(index["metadata"]["total_size"] == 390);
  CHECK(index["metadata"]["format"] == "pt");
  CHECK(index["weight_map"]["wte.weight"] == "model-00001-of-00003.safetensors");
  CHECK(index["weight_map"]["ln.bias"] == "model-00001-of-00003.safetensors");
  CHECK(index["weight_map"]["h.0.attn.weight"] == "model-00002-of-00003.safetensors");
  CHECK(index["weight_map"]["h.0.mask"] == "model-00002-of-00003.safetensors");
  CHECK(index["weight_map"]["huge"] == "model-00003-of-00003.safetensors");

  require_same(load_sharded(dir), sample());
  require_same(load_sharded(index_path), sample());
  SafetensorsReader r = SafetensorsReader::open(dir);
  CHECK(r.names().size() == 5);
  CHECK(r.file_of("huge") == dir + "/model-00003-of-00003.safetensors");
  CHECK(r.info("ln.bias").dtype == "BF16");
  CHECK(r.metadata().at("total_size") == "390");
  require_throws_with([&] { r.get("missing"); },
                      {"[safetensors_index]", "no tensor named 'missing'"});

  // A later save with fewer shards removes the stale ones.
  save_sharded(dir, sample(), limit(1000));
  CHECK(list_dir(dir) == std::vector<std::string>{"model-00001-of-00001.safetensors",
                                                  "model.safetensors.index.json"});
  require_same(load_sharded(dir), sample());
}

TEST_CASE("sharded reader accepts a single file or a directory holding one", "[sharded]") {
  std::string dir = scratch_dir("sharded-single");
  save_safetensors(dir + "/model.safetensors", sample(), {{"k", "v"}});
  require_same(load_sharded(dir), sample());
  require_same(load_sharded(dir + "/model.safetensors"), sample());
  CHECK(SafetensorsReader::open(dir).metadata().at("k") == "v");
  std::string empty = scratch_dir("sharded-none");
  require_throws_with([&] { load_sharded(empty); },
                      {empty, "holds neither model.safetensors.index.json nor model.safetensors"});
}

TEST_CASE("sharded reader rejects inconsistent indexes", "[sharded]") {
  std::string dir = scratch_dir("sharded-bad");
  std::string index_path = save_sharded(dir, sample(), limit(100));
  const std::string good = read_bytes(index_path);
  auto with_index = [&](const std::function<void(json&)>& edit) {
    json j = json::parse(good);
    edit(j);
    write_bytes(index_path, j.dump());
  };

  with_index([](json& j) { j["weight_map"]["ghost"] = "model-00001-of-00003.safetensors"; });
  require_throws_with([&] { load_sharded(dir); },
                      {index_path, "tensor 'ghost' is listed in shard",
                       "model-00001-of-00003.safetensors, which does not hold it"});

  with_index([](json& j) { j["weight_map"].erase("ln.bias"); });
  require_throws_with(
      [&] { load_sharded(dir); },
      {"model-00001-of-00003.safetensors holds tensor 'ln.bias', which the index does not list"});

  with_index([](json& j) { j["weight_map"]["wte.weight"] = "model-00009-of-00009.safetensors"; });
  require_throws_with(
      [&] { load_sharded(dir); },
      {index_path, "model-00009-of-00009.safetensors (holding tensor 'wte.weight') is missing"});

  with_index([](json& j) { j["weight_map"]["wte.weight"] = "../elsewhere.safetensors"; });
  require_throws_with([&] { load_sharded(dir); },
                      {"tensor 'wte.weight'", "expected a file name in the index's directory"});

  with_index([](json& j) { j["weight_map"]["wte.weight"] = 3; });
  require_throws_with([&] { load_sharded(dir); },
                      {"tensor 'wte.weight'", "expected a shard file name, got 3"});

  with_index([](json& j) { j.erase("weight_map"); });
  require_throws_with([&] { load_sharded(dir); }, {index_path, "expected a \"weight_map\" object"});

  with_index([](json& j) { j["metadata"] = 1; });
  require_throws_with([&] { load_sharded(dir); }, {"expected \"metadata\" to be an object"});

  write_bytes(index_path, good.substr(0, good.size() / 2));
  require_throws_with([&] { load_sharded(dir); },
                      {"[safetensors_index] " + index_path, "not valid JSON"});

  // A corrupt shard reports the shard's own path and tensor.
  write_bytes(index_path, good);
  std::string shard = dir + "/model-00002-of-00003.safetensors";  // h.0.*
  std::string bytes = read_bytes(shard);
  write_bytes(shard, bytes.substr(0, bytes.size() - 1));
  require_throws_with([&] { load_sharded(dir); },
                      {"[safetensors] " + shard, "reach past the data buffer"});
}
