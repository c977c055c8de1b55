// DirectoryLock: one holder at a time, the refused one names the holder, released on destruction,
// and the directory is created when missing.
#include "models/io/dir_lock.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>

#include "tests/models/io/io_test_util.h"

using namespace tessera::io;
using namespace tessera::io::testing;
namespace fs = std::filesystem;

TEST_CASE("a directory lock has one holder; the second is refused naming the first") {
  const std::string dir = scratch_dir("lock") + "/runs/a";  // created by the lock
  auto first = std::make_unique<DirectoryLock>(dir, "checkpoint");
  CHECK(fs::is_directory(dir));
  CHECK(fs::exists(dir + "/" + DirectoryLock::kFileName));
  require_throws_with([&] { DirectoryLock second(dir, "checkpoint"); },
                      {"[checkpoint]", dir, "in use by another run",
                       "pid " + std::to_string(::getpid()) + " on host"});
  first.reset();
  CHECK_NOTHROW(DirectoryLock(dir, "checkpoint"));
}

TEST_CASE("a directory that cannot be created is a clear error") {
  const std::string file = scratch_dir("lock-file") + "/plain";
  write_bytes(file, "x");
  require_throws_with([&] { DirectoryLock lock(file + "/sub", "checkpoint"); },
                      {"[checkpoint]", "cannot create directory"});
}
