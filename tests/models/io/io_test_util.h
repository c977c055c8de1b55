// Helpers for the models/io tests: scratch directories, raw safetensors files built byte by byte,
// and a check that a call throws a message containing given text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera::io::testing {

// A new empty directory under $TEST_TMPDIR (or /tmp) whose name starts with `tag`.
std::string scratch_dir(const std::string& tag);

// The file's bytes / a whole new file of these bytes.
std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);

// 8-byte little-endian length of `header`, `header`, then `data`: a file exactly as given.
std::string raw_safetensors(const std::string& header, const std::string& data);

// Names in `dir` (not recursive), sorted.
std::vector<std::string> list_dir(const std::string& dir);

// Runs fn and requires that it throws a std::exception whose what() contains every fragment.
void require_throws_with(const std::function<void()>& fn,
                         const std::vector<std::string>& fragments);

// While alive, this process cannot write files past `max_bytes` (writes fail with EFBIG rather
// than raising SIGXFSZ): a real mid-write I/O failure, like a full disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t max_bytes);
  ~FileSizeLimit();

 private:
  uint64_t old_soft_;
  void (*old_handler_)(int);
};

}  // namespace tessera::io::testing
