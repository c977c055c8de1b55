// Helpers for the models/io tests (see io_test_util.h).
#include "tests/models/io/io_test_util.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessera::io::testing {

std::string scratch_dir(const std::string& tag) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/" + tag + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  REQUIRE(::mkdtemp(buf.data()) != nullptr);
  return buf.data();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out.good());
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

std::string raw_safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void require_throws_with(const std::function<void()>& fn,
                         const std::vector<std::string>& fragments) {
  std::string message;
  bool threw = false;
  try {
    fn();
  } catch (const std::exception& e) {
    threw = true;
    message = e.what();
  }
  INFO("message: " << message);
  REQUIRE(threw);
  for (const std::string& f : fragments) {
    INFO("expected fragment: " << f);
    CHECK(message.find(f) != std::string::npos);
  }
}

FileSizeLimit::FileSizeLimit(uint64_t max_bytes) {
  old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &rl) == 0);
  old_soft_ = rl.rlim_cur;
  rl.rlim_cur = max_bytes;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &rl) == 0);
}

FileSizeLimit::~FileSizeLimit() {
  struct rlimit rl;
  ::getrlimit(RLIMIT_FSIZE, &rl);
  rl.rlim_cur = old_soft_;
  ::setrlimit(RLIMIT_FSIZE, &rl);
  ::signal(SIGXFSZ, old_handler_);
}

}  // namespace tessera::io::testing
