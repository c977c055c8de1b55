// Atomic writes: a committed file replaces the old one whole; a writer that fails or throws
// midway leaves the old file untouched and no temporary file behind.
#include "models/io/atomic_file.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "core/factory.h"
#include "models/io/safetensors.h"
#include "tests/models/io/io_test_util.h"

using namespace tessera;
using namespace tessera::io;
using namespace tessera::io::testing;

TEST_CASE("atomic writer replaces the file only on commit", "[atomic_file]") {
  std::string dir = scratch_dir("atomic");
  std::string path = dir + "/state.json";
  write_file_atomic(path, "old");
  CHECK(read_bytes(path) == "old");
  {
    AtomicFileWriter w(path);
    CHECK(parent_directory(w.temp_path()) == dir);
    w.write("new ");
    w.write(std::string(1000, 'x'));
    CHECK(w.size() == 1004);
    CHECK(read_bytes(path) == "old");  // not yet
    CHECK(list_dir(dir).size() == 2);  // target + hidden temp
    w.commit();
    require_throws_with([&] { w.write("more"); }, {"already committed"});
  }
  CHECK(read_bytes(path) == "new " + std::string(1000, 'x'));
  CHECK(list_dir(dir) == std::vector<std::string>{"state.json"});
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
}

TEST_CASE("atomic writer abandoned by an exception leaves the old file and no temp",
          "[atomic_file]") {
  std::string dir = scratch_dir("atomic-throw");
  std::string path = dir + "/data.bin";
  write_file_atomic(path, "original");
  try {
    AtomicFileWriter w(path);
    w.write(std::string(4096, 'y'));
    throw std::runtime_error("serializer failed halfway");
  } catch (const std::runtime_error&) {
  }
  CHECK(read_bytes(path) == "original");
  CHECK(list_dir(dir) == std::vector<std::string>{"data.bin"});
}

TEST_CASE("a safetensors save that fails mid-write keeps the old file", "[atomic_file]") {
  std::string dir = scratch_dir("atomic-efbig");
  std::string path = dir + "/model.safetensors";
  save_safetensors(path, {{"w", ones({4})}});
  std::string before = read_bytes(path);
  {
    FileSizeLimit limit(64 * 1024);  // the 1 MiB tensor below cannot be written whole
    require_throws_with(
        [&] {
          save_safetensors(path, {{"w", zeros({512, 512})}});
        },
        {"[atomic_write] cannot write", ".model.safetensors.tmp-", "File too large"});
  }
  CHECK(read_bytes(path) == before);
  CHECK(list_dir(dir) == std::vector<std::string>{"model.safetensors"});
  CHECK(SafetensorsFile::open(path).info("w").shape == Shape{4});
}

TEST_CASE("atomic writer reports an impossible target", "[atomic_file]") {
  require_throws_with(
      [] { AtomicFileWriter w("/nonexistent-dir/x/file"); },
      {"[atomic_write] cannot create a temporary file like /nonexistent-dir/x/.file.tmp-"});
  require_throws_with([] { AtomicFileWriter w("dir/"); }, {"expected a file path"});
  CHECK(parent_directory("a/b/c") == "a/b");
  CHECK(parent_directory("c") == ".");
  CHECK(parent_directory("/c") == "/");
}
