// The TESSERA_NUM_THREADS knob: a positive integer sets the thread count; anything else is refused
// with the variable named instead of being silently ignored.
#include "core/parallel.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "core/error.h"

namespace {

// Sets TESSERA_NUM_THREADS for one scope and restores what was there.
class ScopedThreadsEnv {
 public:
  explicit ScopedThreadsEnv(const char* value) {
    if (const char* old = std::getenv("TESSERA_NUM_THREADS")) old_ = old;
    if (value)
      ::setenv("TESSERA_NUM_THREADS", value, 1);
    else
      ::unsetenv("TESSERA_NUM_THREADS");
  }
  ~ScopedThreadsEnv() {
    if (old_)
      ::setenv("TESSERA_NUM_THREADS", old_->c_str(), 1);
    else
      ::unsetenv("TESSERA_NUM_THREADS");
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("TESSERA_NUM_THREADS takes a positive integer; unset or empty means every core",
          "[parallel]") {
  {
    ScopedThreadsEnv env(nullptr);
    CHECK(tessera::env_num_threads() == 0);
  }
  {
    ScopedThreadsEnv env("");
    CHECK(tessera::env_num_threads() == 0);
  }
  {
    ScopedThreadsEnv env("3");
    CHECK(tessera::env_num_threads() == 3);
  }
  {
    ScopedThreadsEnv env("64");
    CHECK(tessera::env_num_threads() == 64);
  }
}

TEST_CASE("TESSERA_NUM_THREADS refuses anything but a positive integer, naming the variable",
          "[parallel]") {
  for (const char* bad : {"abc", "0", "-2", "4x", " 4", "+4", "2.5", "99999999999999999999"}) {
    INFO("TESSERA_NUM_THREADS=" << bad);
    ScopedThreadsEnv env(bad);
    REQUIRE_THROWS_AS(tessera::env_num_threads(), tessera::ValueError);
    REQUIRE_THROWS_WITH(tessera::env_num_threads(),
                        Catch::Contains("TESSERA_NUM_THREADS") &&
                            Catch::Contains("positive integer") &&
                            Catch::Contains(std::string("got '") + bad + "'"));
  }
}
