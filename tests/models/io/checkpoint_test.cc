// Checkpoint directories: round trip of model, optimizer and state; atomic replacement;
// latest_checkpoint; and corrupt, truncated or mismatched files as errors naming file and tensor.
#include "models/io/checkpoint.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "core/factory.h"
#include "tests/models/io/io_test_util.h"
#include "tests/testing/compare.h"

using namespace tessera;
using namespace tessera::io;
using namespace tessera::io::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

CheckpointContents sample(int64_t step) {
  CheckpointContents c;
  c.model = {{"wte.weight", randn({8, 4})}, {"ln_f.bias", full({4}, 0.25, {.dtype = DType::bf16})}};
  c.optimizer = {{"exp_avg.wte.weight", full({8, 4}, double(step))},
                 {"exp_avg_sq.wte.weight", ones({8, 4})},
                 {"step", scalar_tensor(double(step), {.dtype = DType::i64})}};
  c.state = {{"step", step},
             {"schedule", {{"lr", 3e-4}}},
             {"scaler", {{"scale", 65536.0}, {"growth_tracker", 3}}},
             {"rng", {{"seed", 1234}, {"offset", 99}}},
             {"data", {{"epoch", 1}, {"position", 4096}}},
             {"config", {{"model", "gpt-tiny"}}}};
  return c;
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

// Flips one byte of `tensor`'s data in a safetensors file.
void flip_tensor_byte(const std::string& path, const std::string& tensor) {
  SafetensorsFile f = SafetensorsFile::open(path);
  uint64_t pos = f.info(tensor).begin;
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  bytes[8 + n + pos] ^= 0x10;
  write_bytes(path, bytes);
}

}  // namespace

TEST_CASE("checkpoint round trip restores tensors and state", "[checkpoint]") {
  std::string root = scratch_dir("ckpt");
  std::string dir = checkpoint_dir(root, 10);
  CHECK(dir == root + "/step-00000010");
  CheckpointContents in = sample(10);
  save_checkpoint(dir, in);
  CHECK(list_dir(root) == std::vector<std::string>{"step-00000010"});
  CHECK(list_dir(dir) ==
        std::vector<std::string>{"model.safetensors", "optimizer.safetensors", "state.json"});
  // The weights file is plain safetensors other tools can read.
  CHECK(SafetensorsFile::open(dir + "/model.safetensors").names().size() == 2);

  CheckpointContents out = load_checkpoint(dir);
  require_same(out.model, in.model);
  require_same(out.optimizer, in.optimizer);
  CHECK(out.state == in.state);
}

TEST_CASE("checkpoint save replaces an existing directory whole", "[checkpoint]") {
  std::string root = scratch_dir("ckpt-replace");
  std::string dir = root + "/latest";
  save_checkpoint(dir, sample(1));
  CheckpointContents second = sample(2);
  second.optimizer.pop_back();  // a different set of files' contents
  save_checkpoint(dir, second);
  CHECK(list_dir(root) == std::vector<std::string>{"latest"});
  CheckpointContents out = load_checkpoint(dir);
  CHECK(out.state["step"] == 2);
  require_same(out.optimizer, second.optimizer);
}

TEST_CASE("checkpoint save that fails midway keeps the previous checkpoint", "[checkpoint]") {
  std::string root = scratch_dir("ckpt-fail");
  std::string dir = checkpoint_dir(root, 5);
  save_checkpoint(dir, sample(5));
  CheckpointContents big = sample(6);
  big.model.emplace_back("big", zeros({256, 256}));
  {
    FileSizeLimit limit(64 * 1024);
    require_throws_with([&] { save_checkpoint(dir, big); }, {"cannot write", "model.safetensors"});
  }
  CHECK(list_dir(root) == std::vector<std::string>{"step-00000005"});
  CHECK(load_checkpoint(dir).state["step"] == 5);
  require_throws_with(
      [&] { save_checkpoint(dir, {.model = {}, .optimizer = {}, .state = json::array()}); },
      {"[checkpoint]", "expected the state to be a JSON object, got array"});
}

TEST_CASE("latest_checkpoint picks the highest step and refuses a damaged one") {
  std::string root = scratch_dir("ckpt-latest");
  CHECK_FALSE(latest_checkpoint(root).has_value());
  CHECK_FALSE(latest_checkpoint(root + "/nope").has_value());
  save_checkpoint(checkpoint_dir(root, 5), sample(5));
  save_checkpoint(checkpoint_dir(root, 20), sample(20));
  save_checkpoint(checkpoint_dir(root, 7), sample(7));
  fs::create_directories(checkpoint_dir(root, 200) + ".tmp-abcdef");  // an interrupted save
  fs::create_directories(checkpoint_dir(root, 300) + ".old-77");      // another one
  fs::create_directories(root + "/step-9x");                          // not a step name
  CHECK(latest_checkpoint(root) == checkpoint_dir(root, 20));
  std::vector<int64_t> steps;
  for (const CheckpointEntry& e : list_checkpoints(root)) steps.push_back(e.step);
  CHECK(steps == std::vector<int64_t>{5, 7, 20});

  // A newer step whose state.json is missing or foreign is refused, never skipped silently.
  fs::create_directories(checkpoint_dir(root, 100));
  require_throws_with([&] { latest_checkpoint(root); },
                      {"[checkpoint]", "step-00000100/state.json", "file is missing"});
  fs::remove_all(checkpoint_dir(root, 100));
  save_checkpoint(checkpoint_dir(root, 300), sample(300));
  write_bytes(checkpoint_dir(root, 300) + "/state.json", "{\"format\": \"something-else\"}");
  require_throws_with([&] { latest_checkpoint(root); },
                      {"step-00000300/state.json", "expected \"format\""});
}

TEST_CASE("remove_stale_temporaries deletes interrupted saves only") {
  std::string root = scratch_dir("ckpt-stale");
  save_checkpoint(checkpoint_dir(root, 4), sample(4));
  fs::create_directories(checkpoint_dir(root, 8) + ".tmp-abcdef");
  write_bytes(checkpoint_dir(root, 8) + ".tmp-abcdef/model.safetensors", "partial");
  fs::create_directories(checkpoint_dir(root, 4) + ".old-123");
  fs::create_directories(root + "/mine.tmp-1");  // not a checkpoint temporary
  const std::vector<std::string> removed = remove_stale_temporaries(root);
  CHECK(removed == std::vector<std::string>{checkpoint_dir(root, 4) + ".old-123",
                                            checkpoint_dir(root, 8) + ".tmp-abcdef"});
  CHECK(list_dir(root) == std::vector<std::string>{"mine.tmp-1", "step-00000004"});
  CHECK(load_checkpoint(checkpoint_dir(root, 4)).state["step"] == 4);
}

TEST_CASE("a checkpoint's weights load without its optimizer file when asked") {
  std::string root = scratch_dir("ckpt-no-optimizer");
  std::string dir = checkpoint_dir(root, 2);
  const CheckpointContents want = sample(2);
  save_checkpoint(dir, want);
  fs::remove(dir + "/optimizer.safetensors");
  require_throws_with([&] { load_checkpoint(dir); }, {"optimizer.safetensors", "missing"});
  CheckpointContents c = load_checkpoint(dir, {.load_optimizer = false});
  CHECK(c.optimizer.empty());
  require_same(c.model, want.model);
}

TEST_CASE("checkpoint load names the corrupt file and tensor", "[checkpoint]") {
  std::string root = scratch_dir("ckpt-corrupt");
  std::string dir = checkpoint_dir(root, 3);
  std::string model = dir + "/model.safetensors";
  std::string optim = dir + "/optimizer.safetensors";
  std::string state = dir + "/state.json";
  auto fresh = [&] { save_checkpoint(dir, sample(3)); };

  fresh();
  flip_tensor_byte(model, "ln_f.bias");
  require_throws_with(
      [&] { load_checkpoint(dir); },
      {"[checkpoint] " + model, "tensor 'ln_f.bias': checksum", "the data is corrupt"});
  CHECK(load_checkpoint(dir, {.verify_checksums = false}).state["step"] == 3);

  fresh();
  std::string bytes = read_bytes(optim);
  write_bytes(optim, bytes.substr(0, bytes.size() - 3));
  require_throws_with([&] { load_checkpoint(dir); },
                      {"[checkpoint] " + optim, "the manifest says " + std::to_string(bytes.size()),
                       "(truncated)"});
  require_throws_with([&] { load_checkpoint(dir, {.verify_checksums = false}); }, {optim});

  fresh();
  fs::remove(optim);
  require_throws_with([&] { load_checkpoint(dir); },
                      {"[checkpoint] " + optim + ": file is missing"});

  fresh();
  json j = json::parse(read_bytes(state));
  j["files"]["model.safetensors"]["tensors"]["h.0.weight"] = "0000000000000000";
  write_bytes(state, j.dump());
  require_throws_with([&] { load_checkpoint(dir); },
                      {model, "tensor 'h.0.weight' is in the manifest but not in the file"});

  fresh();
  j = json::parse(read_bytes(state));
  j["files"]["optimizer.safetensors"]["tensors"].erase("step");
  write_bytes(state, j.dump());
  require_throws_with([&] { load_checkpoint(dir); },
                      {optim, "tensor 'step' is in the file but not in the manifest"});

  // An optimizer file swapped in from another checkpoint (same names, shapes, size) is caught.
  fresh();
  save_checkpoint(root + "/other", sample(4));
  fs::copy_file(root + "/other/optimizer.safetensors", optim, fs::copy_options::overwrite_existing);
  require_throws_with([&] { load_checkpoint(dir); },
                      {optim, "tensor 'step': checksum", "the data is corrupt"});

  fresh();
  write_bytes(state, read_bytes(state).substr(0, 40));
  require_throws_with([&] { load_checkpoint(dir); },
                      {"[checkpoint] " + state + ": not valid JSON"});

  fresh();
  write_bytes(state, "{\"format\": \"tessera-checkpoint\", \"version\": 2}");
  require_throws_with([&] { load_checkpoint(dir); }, {state, "expected version 1, got 2"});

  fresh();
  fs::remove(state);
  require_throws_with([&] { load_checkpoint(dir); },
                      {state + ": file is missing (not a complete checkpoint)"});
  require_throws_with([&] { load_checkpoint(root + "/absent"); }, {"not a checkpoint directory"});
}

TEST_CASE("checksum_hex sees every byte", "[checkpoint]") {
  std::string a(77, 'a');
  std::string h = checksum_hex(a.data(), a.size());
  CHECK(h.size() == 16);
  CHECK(checksum_hex(a.data(), a.size()) == h);
  for (size_t i : {0, 31, 32, 63, 64, 76}) {
    std::string b = a;
    b[i] ^= 1;
    CHECK(checksum_hex(b.data(), b.size()) != h);
  }
  CHECK(checksum_hex(a.data(), 76) != h);
  CHECK(checksum_hex(nullptr, 0) != checksum_hex("\0", 1));
}
