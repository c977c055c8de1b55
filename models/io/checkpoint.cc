// Checkpoint directories: write into a temporary sibling, rename into place; read back with a
// manifest check (see checkpoint.h).
#include "models/io/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "models/io/atomic_file.h"
#include "models/io/piece_checkpoint.h"

namespace tessera::io {
namespace {

constexpr const char* kOp = "checkpoint";
constexpr const char* kFormat = "tessera-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
namespace fs = std::filesystem;
using json = nlohmann::json;

// Writes one safetensors file and returns its manifest entry {"bytes", "tensors": {name: sum}}.
json write_tensors(const std::string& path, const NamedTensors& tensors) {
  SafetensorsLayout layout = plan_safetensors(tensors, {}, path);
  json sums = json::object();
  for (const auto& [name, t] : layout.ordered) {
    sums[name] = checksum_hex(t.data_ptr(), size_t(t.numel()) * t.itemsize());
  }
  save_safetensors(path, layout.ordered);
  return {{"bytes", 8 + layout.header.size() + layout.data_bytes}, {"tensors", sums}};
}

// Reads one safetensors file and checks it against its manifest entry.
NamedTensors read_tensors(const std::string& path, const json& entry, bool verify) {
  std::string where = path;
  TS_CHECK(fs::exists(path), kOp, where, ": file is missing");
  TS_CHECK(entry.is_object() && entry.contains("bytes") && entry["bytes"].is_number_unsigned() &&
               entry.contains("tensors") && entry["tensors"].is_object(),
           kOp, where, ": manifest entry in state.json is malformed: ", entry.dump());
  uint64_t expected_bytes = entry["bytes"].get<uint64_t>();
  uint64_t bytes = fs::file_size(path);
  TS_CHECK(bytes == expected_bytes, kOp, where, ": file is ", bytes, " bytes, the manifest says ",
           expected_bytes, bytes < expected_bytes ? " (truncated)" : "");
  SafetensorsFile file = SafetensorsFile::open(path);
  const json& sums = entry["tensors"];
  for (const auto& [name, sum] : sums.items()) {
    TS_CHECK(file.contains(name), kOp, where, ": tensor '", name,
             "' is in the manifest but not in the file");
  }
  NamedTensors out;
  for (const std::string& name : file.names()) {
    TS_CHECK(sums.contains(name), kOp, where, ": tensor '", name,
             "' is in the file but not in the manifest");
    Tensor t = file.get(name);
    if (verify) {
      std::string got = checksum_hex(t.data_ptr(), size_t(t.numel()) * t.itemsize());
      std::string want = sums[name].is_string() ? sums[name].get<std::string>() : sums[name].dump();
      TS_CHECK(got == want, kOp, where, ": tensor '", name, "': checksum ", got,
               " differs from the manifest's ", want, " (the data is corrupt)");
    }
    out.emplace_back(name, std::move(t));
  }
  return out;
}

// Parses state.json; throws naming the file when it is not a checkpoint manifest.
json read_state(const std::string& path) {
  TS_CHECK(fs::exists(path), kOp, path, ": file is missing (not a complete checkpoint)");
  json state;
  try {
    state = json::parse(read_file(path, kOp));
  } catch (const json::exception& e) {
    TS_FAIL(kOp, path, ": not valid JSON: ", e.what());
  }
  TS_CHECK(state.is_object() && state.value("format", "") == kFormat, kOp, path,
           ": expected \"format\": \"", kFormat, "\"");
  TS_CHECK(state.contains("version") && state["version"] == kVersion, kOp, path,
           ": expected version ", kVersion, ", got ", state.value("version", json()).dump());
  TS_CHECK(state.contains("state") && state["state"].is_object(), kOp, path,
           ": expected a \"state\" object");
  // A sharded checkpoint (piece_checkpoint.h) lists its tensors in its index instead.
  if (state.contains("index")) {
    TS_CHECK(state["index"] == kPieceIndexFile, kOp, path, ": expected \"index\": \"",
             kPieceIndexFile, "\"");
    return state;
  }
  TS_CHECK(state.contains("files") && state["files"].is_object() &&
               state["files"].contains(kModelFile) && state["files"].contains(kOptimizerFile),
           kOp, path, ": expected a \"files\" manifest naming ", kModelFile, " and ",
           kOptimizerFile);
  return state;
}

}  // namespace

std::string checksum_hex(const void* data, size_t nbytes) {
  // Four independent multiply-rotate lanes over 8-byte words (fast), folded with the length.
  constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full;
  auto round = [](uint64_t h, uint64_t w) {
    h += w * kP2;
    h = (h << 31) | (h >> 33);
    return h * kP1;
  };
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {kP1, kP2, 0, ~kP1};
  size_t i = 0;
  for (; i + 32 <= nbytes; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = round(lane[l], w);
    }
  }
  uint64_t h = uint64_t(nbytes) * kP1;
  for (uint64_t v : lane) h = round(h ^ v, v);
  for (; i < nbytes; ++i) h = round(h, uint64_t(p[i]) + 1);
  h ^= h >> 29;
  h *= kP2;
  h ^= h >> 32;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string checkpoint_dir(const std::string& root, int64_t step) {
  TS_CHECK(step >= 0, kOp, "expected a step >= 0, got ", step);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return (fs::path(root) / buf).string();
}

void save_checkpoint(const std::string& dir, const CheckpointContents& contents) {
  TS_CHECK(contents.state.is_object(), kOp, dir, ": expected the state to be a JSON object, got ",
           contents.state.type_name());
  write_directory_atomic(dir, kOp, [&](const std::string& tmp) {
    json files = json::object();
    files[kModelFile] = write_tensors((fs::path(tmp) / kModelFile).string(), contents.model);
    files[kOptimizerFile] =
        write_tensors((fs::path(tmp) / kOptimizerFile).string(), contents.optimizer);
    json state = {
        {"format", kFormat}, {"version", kVersion}, {"state", contents.state}, {"files", files}};
    write_file_atomic((fs::path(tmp) / kStateFile).string(), state.dump(2) + "\n");
  });
}

CheckpointContents load_checkpoint(const std::string& dir, const CheckpointLoadOptions& options) {
  TS_CHECK(fs::is_directory(dir), kOp, dir, ": not a checkpoint directory (missing)");
  json state = read_state((fs::path(dir) / kStateFile).string());
  CheckpointContents out;
  out.state = state["state"];
  if (state.contains("index")) {
    // Every tensor consolidated from its pieces (each piece's checksum verified as it is read);
    // the optimizer's under their "optim/<state>/<parameter>" names.
    const PieceReader reader = PieceReader::open(dir);
    for (const std::string& name : reader.names()) {
      const bool optimizer = name.rfind("optim/", 0) == 0;
      if (optimizer && !options.load_optimizer) continue;
      (optimizer ? out.optimizer : out.model).emplace_back(name, reader.read_full(name));
    }
    return out;
  }
  out.model = read_tensors((fs::path(dir) / kModelFile).string(), state["files"][kModelFile],
                           options.verify_checksums);
  if (options.load_optimizer) {
    out.optimizer = read_tensors((fs::path(dir) / kOptimizerFile).string(),
                                 state["files"][kOptimizerFile], options.verify_checksums);
  }
  return out;
}

nlohmann::json load_checkpoint_state(const std::string& dir) {
  TS_CHECK(fs::is_directory(dir), kOp, dir, ": not a checkpoint directory (missing)");
  return read_state((fs::path(dir) / kStateFile).string())["state"];
}

namespace {

// The step of a "step-<digits>" name, or -1 for any other name.
int64_t step_of(const std::string& name) {
  if (name.size() <= 5 || name.size() > 5 + 18 || name.compare(0, 5, "step-") != 0) return -1;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return -1;
  return std::stoll(name.substr(5));
}

// True for "step-<digits>.tmp-*" and "step-<digits>.old-*": what save_checkpoint leaves when it is
// interrupted.
bool is_save_temporary(const std::string& name) {
  for (const char* mark : {".tmp-", ".old-"}) {
    const size_t at = name.find(mark);
    if (at != std::string::npos && step_of(name.substr(0, at)) >= 0) return true;
  }
  return false;
}

}  // namespace

std::vector<CheckpointEntry> list_checkpoints(const std::string& root) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_directory(ec)) out.push_back({step, e.path().string()});
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& root) {
  const std::vector<CheckpointEntry> all = list_checkpoints(root);
  if (all.empty()) return std::nullopt;
  const std::string& latest = all.back().path;
  read_state((fs::path(latest) / kStateFile).string());  // throws naming the damaged file
  return latest;
}

std::vector<std::string> remove_stale_temporaries(const std::string& root) {
  std::vector<std::string> removed;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return removed;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!is_save_temporary(e.path().filename().string())) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    TS_CHECK(!rm, kOp, e.path().string(), ": cannot remove this interrupted save: ", rm.message());
    removed.push_back(e.path().string());
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

}  // namespace tessera::io
