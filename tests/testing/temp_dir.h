// A temporary directory owned by one test (or one test process): tests run in parallel and on
// shared machines, so none writes a fixed path under /tmp.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace tessera::testing {

// A new, empty directory "<base>/<prefix>-XXXXXX" made by mkdtemp (unique even across processes),
// where base is $TEST_TMPDIR when Bazel sets it, else the system's temporary directory ($TMPDIR,
// else /tmp). It is removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tessera") {
    const std::string pattern = (base_dir() / (prefix + "-XXXXXX")).string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      throw std::runtime_error("[test] cannot create a temporary directory " + pattern + ": " +
                               std::strerror(errno));
    }
    path_ = std::filesystem::path(buf.data());
  }
  ~TempDir() {
    std::error_code ignored;  // a destructor never throws; a leftover directory is harmless
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // "<dir>/<name>", not created: a file or directory for the test to write.
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static std::filesystem::path base_dir() {
    const char* bazel = std::getenv("TEST_TMPDIR");
    if (bazel != nullptr && *bazel != '\0') return bazel;
    std::error_code ec;  // $TMPDIR set but empty or missing: fall back to /tmp
    std::filesystem::path system = std::filesystem::temp_directory_path(ec);
    return ec || system.empty() ? std::filesystem::path("/tmp") : system;
  }

  std::filesystem::path path_;
};

}  // namespace tessera::testing
