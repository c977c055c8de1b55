// `tessera checkpoint inspect DIR`: what a checkpoint holds (step, the layout and model it was
// written under, every tensor with its dtype, global shape and bytes) and whether its bytes are
// intact (each tensor's checksum against state.json's manifest). Unlike load_checkpoint, which
// stops at the first problem, it reads on past damage and reports every damaged tensor with its
// file, so a truncated or corrupt checkpoint is described in full; any problem exits non-zero.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/io/atomic_file.h"
#include "models/io/checkpoint.h"
#include "models/io/safetensors.h"
#include "models/train/train_state.h"
#include "tools/cli/commands.h"
#include "tools/cli/inspect_sharded.h"

namespace tessera::cli {

const char* const kCheckpointInspectUsage =
    "usage: tessera checkpoint inspect DIR\n"
    "  DIR   a checkpoint (step-N directory) or the directory holding them (the latest is read)\n"
    "  Prints the step, the layout and model the checkpoint was written under, every tensor of\n"
    "  model.safetensors and optimizer.safetensors (name, dtype, global shape, bytes) and the\n"
    "  totals, and verifies each tensor's checksum against state.json's manifest. A missing,\n"
    "  truncated or corrupt file is reported naming the tensor and the file; the exit code is\n"
    "  then 1.\n";

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kTensorFiles[] = {"model.safetensors", "optimizer.safetensors"};

// A read-only mapping of a whole file (empty for an empty file); unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    TS_CHECK(fd >= 0, "checkpoint", path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    size_ = size_t(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      data_ = p == MAP_FAILED ? nullptr : static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    TS_CHECK(size_ == 0 || data_ != nullptr, "checkpoint", path, ": cannot map the file");
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct TensorRow {
  std::string name, dtype, shape, status;
  uint64_t bytes = 0;
};

struct FileReport {
  std::string name;
  uint64_t file_bytes = 0, manifest_bytes = 0, tensor_bytes = 0;
  std::vector<TensorRow> tensors;
};

struct Report {
  std::vector<FileReport> files;
  std::vector<std::string> problems;  // "<file>: tensor '<name>': ..." each
  int64_t verified = 0;
};

std::string shape_text(const json& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].dump();
  return s + "]";
}

// The header of a safetensors file, read on its own so that a file whose data is truncated still
// lists its tensors. Throws naming the file when the header itself is unreadable.
json read_header(const std::string& path, const MappedFile& file) {
  TS_CHECK(file.size() >= 8, "checkpoint", path, ": file is ", file.size(),
           " bytes, shorter than the 8-byte safetensors header length (truncated)");
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  TS_CHECK(n <= file.size() - 8 && n <= io::SafetensorsFile::kMaxHeaderBytes, "checkpoint", path,
           ": header of ", n, " bytes does not fit the file's ", file.size(),
           " bytes (truncated or not safetensors)");
  try {
    json header = json::parse(reinterpret_cast<const char*>(file.data()) + 8,
                              reinterpret_cast<const char*>(file.data()) + 8 + n);
    TS_CHECK(header.is_object(), "checkpoint", path, ": header is not a JSON object");
    return header;
  } catch (const json::exception& e) {
    TS_FAIL("checkpoint", path, ": header is not valid JSON: ", e.what());
  }
}

// One tensor: its row, and a problem when its bytes are out of the file or fail the checksum.
TensorRow inspect_tensor(const std::string& path, const std::string& name, const json& entry,
                         const MappedFile& file, uint64_t data_start, const json& sums,
                         Report& report) {
  TensorRow row{.name = name, .dtype = "?", .shape = "?", .status = "?"};
  const std::string where = path + ": tensor '" + name + "'";
  auto problem = [&](const std::string& status, const std::string& what) {
    row.status = status;
    report.problems.push_back(where + ": " + what);
    return row;
  };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2 || !entry["data_offsets"][0].is_number_unsigned() ||
      !entry["data_offsets"][1].is_number_unsigned() || !entry["shape"].is_array())
    return problem("BAD ENTRY", "malformed header entry " + entry.dump());
  row.dtype =
      entry["dtype"].is_string() ? entry["dtype"].get<std::string>() : entry["dtype"].dump();
  row.shape = shape_text(entry["shape"]);
  const uint64_t begin = entry["data_offsets"][0], end = entry["data_offsets"][1];
  row.bytes = end >= begin ? end - begin : 0;
  if (end < begin) return problem("BAD ENTRY", "data_offsets end before they begin");
  if (data_start + end > file.size())
    return problem("TRUNCATED", str_cat("its bytes [", data_start + begin, ", ", data_start + end,
                                        ") end past the file's ", file.size(),
                                        " bytes (the file is truncated)"));
  if (!sums.contains(name))
    return problem("NOT IN MANIFEST",
                   "is in the file but not in state.json's manifest (no checksum recorded)");
  if (!sums[name].is_string())
    return problem("BAD MANIFEST",
                   "state.json's manifest holds " + sums[name].dump() + " instead of a checksum");
  const std::string want = sums[name].get<std::string>();
  const std::string got = io::checksum_hex(file.data() + data_start + begin, row.bytes);
  if (got != want)
    return problem("CORRUPT", "checksum " + got + " differs from the manifest's " + want +
                                  " (the data is corrupt)");
  row.status = "ok " + got;
  ++report.verified;
  return row;
}

FileReport inspect_file(const std::string& dir, const std::string& name, const json& manifest,
                        Report& report) {
  FileReport out;
  out.name = name;
  const std::string path = (fs::path(dir) / name).string();
  if (!manifest.is_object() || !manifest.contains("tensors") || !manifest["tensors"].is_object()) {
    report.problems.push_back(path + ": state.json's manifest has no entry for this file");
    return out;
  }
  const json& sums = manifest["tensors"];
  out.manifest_bytes = manifest.value("bytes", uint64_t(0));
  if (!fs::exists(path)) {
    report.problems.push_back(
        str_cat(path, ": file is missing (the manifest lists ", sums.size(), " tensors in it)"));
    return out;
  }
  try {
    MappedFile file(path);
    out.file_bytes = file.size();
    if (out.file_bytes != out.manifest_bytes)
      report.problems.push_back(str_cat(path, ": file is ", out.file_bytes,
                                        " bytes, the manifest says ", out.manifest_bytes,
                                        out.file_bytes < out.manifest_bytes ? " (truncated)" : ""));
    const json header = read_header(path, file);
    uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, file.data(), 8);
    std::vector<std::pair<uint64_t, std::string>> order;  // file order, as the reader lists them
    for (const auto& [key, entry] : header.items()) {
      if (key == "__metadata__") continue;
      const bool placed = entry.is_object() && entry.contains("data_offsets") &&
                          entry["data_offsets"].is_array() && !entry["data_offsets"].empty() &&
                          entry["data_offsets"][0].is_number_unsigned();
      order.emplace_back(placed ? entry["data_offsets"][0].get<uint64_t>() : 0, key);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [offset, key] : order) {
      out.tensors.push_back(
          inspect_tensor(path, key, header[key], file, 8 + header_bytes, sums, report));
      out.tensor_bytes += out.tensors.back().bytes;
    }
    for (const auto& [key, sum] : sums.items())
      if (!header.contains(key))
        report.problems.push_back(path + ": tensor '" + key +
                                  "' is in the manifest but not in the file");
    // The full reader's structural checks (gaps, overlaps, dtypes), once the bytes are all there.
    if (out.file_bytes >= out.manifest_bytes) io::SafetensorsFile::open(path);
  } catch (const std::exception& e) {
    report.problems.push_back(train::error_text(e));
  }
  return out;
}

// "data 2 x pipeline 1 x sequence 1 x tensor 1 (1d) = 2 ranks; zero stage 1; precision f32".
// world_size: the ranks that wrote it (state.json's "world_size"; 0 in older checkpoints), which
// gives the data size when the config left it to the job.
std::string layout_text(const train::TrainConfig& c, int64_t world_size) {
  parallel::ParallelConfig p = c.parallel;
  const int64_t others = int64_t(p.pipeline) * p.sequence * p.tensor.size;
  const bool known = c.data_size_given || (world_size > 0 && world_size % others == 0);
  if (!c.data_size_given && known) p.data = int(world_size / others);
  std::string s = known ? str_cat("data ", p.data)
                        : std::string("data (the job's remaining ranks, not recorded)");
  s += str_cat(" x pipeline ", p.pipeline);
  if (p.pipeline > 1)
    s += str_cat(" (", parallel::pipeline::schedule_name(p.pipeline_options.schedule), ")");
  s += str_cat(" x sequence ", p.sequence);
  if (p.sequence > 1) s += str_cat(" (", parallel::sequence::mode_name(p.sequence_mode), ")");
  s += str_cat(" x tensor ", p.tensor.size, " (", p.tensor.mode);
  if (p.tensor.mode == parallel::TensorMode::two_point_five_d)
    s += str_cat(", depth ", p.tensor.depth);
  if (p.tensor.sequence_parallel) s += ", sequence_parallel";
  s += ")";
  if (known) s += str_cat(" = ", p.world_size(), p.world_size() == 1 ? " rank" : " ranks");
  s += str_cat("; zero stage ", c.zero.stage, c.zero.offload ? " (offload)" : "");
  return s + "; precision " + c.precision.dtype;
}

std::string model_text(const train::TrainConfig& c) {
  switch (c.kind) {
    case train::ModelKind::gpt:
      return str_cat("gpt: vocab ", c.gpt.vocab_size, ", context ", c.gpt.context_length, ", ",
                     c.gpt.n_layers, " layers, ", c.gpt.n_heads, " heads, d_model ", c.gpt.d_model);
    case train::ModelKind::bert:
      return str_cat("bert: vocab ", c.bert.vocab_size, ", ", c.bert.n_layers, " layers, d_model ",
                     c.bert.d_model);
    case train::ModelKind::vit:
      return str_cat("vit: ", c.vit.n_layers, " layers, d_model ", c.vit.d_model);
    case train::ModelKind::custom:
      return "custom (a model of the C++ API): " + c.custom.dump();
  }
  return "?";
}

void print_report(const std::string& dir, const json& state, const Report& report) {
  const json& trainer = state["state"];
  std::cout << "checkpoint " << dir << "\n";
  std::cout << "  step     " << trainer.value("step", json("?")).dump() << "\n";
  try {
    const train::TrainConfig c = train::checkpoint_config(trainer, dir);
    std::cout << "  model    " << model_text(c) << "\n";
    std::cout << "  layout   " << layout_text(c, trainer.value("world_size", int64_t(0))) << "\n";
  } catch (const std::exception& e) {
    std::cout << "  layout   unknown: " << train::error_text(e) << "\n";
  }
  uint64_t tensors = 0, tensor_bytes = 0, file_bytes = 0;
  for (const FileReport& f : report.files) {
    std::cout << "\n"
              << f.name << ": " << f.tensors.size() << " tensors, " << f.tensor_bytes
              << " bytes of tensor data, file " << f.file_bytes << " bytes (manifest "
              << f.manifest_bytes << ")\n";
    size_t name_w = 4, shape_w = 5;
    for (const TensorRow& t : f.tensors) {
      name_w = std::max(name_w, t.name.size());
      shape_w = std::max(shape_w, t.shape.size());
    }
    std::printf("  %-*s  %-5s  %-*s  %12s  %s\n", int(name_w), "name", "dtype", int(shape_w),
                "shape", "bytes", "checksum");
    for (const TensorRow& t : f.tensors)
      std::printf("  %-*s  %-5s  %-*s  %12llu  %s\n", int(name_w), t.name.c_str(), t.dtype.c_str(),
                  int(shape_w), t.shape.c_str(), (unsigned long long)t.bytes, t.status.c_str());
    std::fflush(stdout);
    tensors += f.tensors.size();
    tensor_bytes += f.tensor_bytes;
    file_bytes += f.file_bytes;
  }
  if (report.files.empty()) return;  // a sharded checkpoint: inspect_sharded reports the rest
  std::cout << "\ntotal: " << tensors << " tensors, " << tensor_bytes << " bytes of tensor data, "
            << file_bytes << " bytes in files; checksums: " << report.verified << " of " << tensors
            << " verified, " << report.problems.size() << " problem(s)\n";
}

}  // namespace

int run_checkpoint_inspect(const std::vector<std::string>& args) {
  try {
    std::string path;
    ArgReader r(args, "checkpoint inspect");
    while (r.next()) {
      if (r.help()) {
        std::cout << kCheckpointInspectUsage;
        return 0;
      } else if (!r.name().empty() && r.name()[0] != '-' && path.empty())
        path = r.name();
      else
        r.unknown();
    }
    TS_CHECK(!path.empty(), "checkpoint inspect", "expected a checkpoint DIR (see --help)");
    const std::string dir = train::resolve_checkpoint_dir(path);
    const std::string state_path = (fs::path(dir) / "state.json").string();
    json state;
    try {
      state = json::parse(io::read_file(state_path, "checkpoint"));
    } catch (const json::exception& e) {
      TS_FAIL("checkpoint", state_path, ": not valid JSON: ", e.what());
    }
    if (state.is_object() && state.contains("index") && state.contains("state") &&
        state["state"].is_object()) {  // sharded: the index lists the pieces
      print_report(dir, state, Report{});
      return inspect_sharded(dir);
    }
    TS_CHECK(state.is_object() && state.value("format", "") == "tessera-checkpoint" &&
                 state.contains("files") && state["files"].is_object() && state.contains("state") &&
                 state["state"].is_object(),
             "checkpoint", state_path,
             ": expected a checkpoint manifest (\"format\": \"tessera-checkpoint\" with \"files\" "
             "and \"state\")");
    Report report;
    for (const char* name : kTensorFiles)
      report.files.push_back(inspect_file(dir, name, state["files"].value(name, json()), report));
    print_report(dir, state, report);
    for (const std::string& p : report.problems)
      std::cerr << "tessera checkpoint inspect: " << p << "\n";
    return report.problems.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "tessera checkpoint inspect: " << train::error_text(e) << "\n";
    return 1;
  }
}

}  // namespace tessera::cli
