// Helpers for the data tests: a scratch directory removed at scope exit, whole-file reads and
// writes, and the path of a committed fixture under the Bazel runfiles tree.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera::data::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/tessera_data_XXXXXX";
    path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
    if (path_.empty()) throw std::runtime_error("mkdtemp failed");
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tests/models/data/fixtures/<name> in the runfiles tree when run by Bazel, else relative to cwd.
inline std::string fixture(const std::string& name) {
  const std::string rel = "tests/models/data/fixtures/" + name;
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir && workspace) {
    const std::string p = std::string(srcdir) + "/" + workspace + "/" + rel;
    if (std::filesystem::exists(p)) return p;
  }
  return rel;
}

}  // namespace tessera::data::testing
