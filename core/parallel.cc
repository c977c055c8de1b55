#include "core/parallel.h"

#include <omp.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tessera {
namespace {
int initial_threads() {
  const int n = env_num_threads();
  return n > 0 ? n : omp_get_num_procs();
}

std::atomic<int>& thread_count() {
  static std::atomic<int> n{[] {
    int t = initial_threads();
    omp_set_num_threads(t);
    return t;
  }()};
  return n;
}
}  // namespace

int env_num_threads() {
  const char* env = std::getenv("TESSERA_NUM_THREADS");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(env, &end, 10);
  // strtol accepts leading blanks and signs; a thread count is digits only.
  const bool digits = *env >= '0' && *env <= '9' && *end == '\0';
  TS_CHECK(digits && errno == 0 && n >= 1 && n <= 1 << 16, "threads",
           "TESSERA_NUM_THREADS: expected a positive integer (the CPU thread count, at most ",
           1 << 16, "), got '", env, "'; set it to e.g. 4, or unset it to use every core");
  return int(n);
}

int num_threads() { return thread_count().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  if (n < 1) n = 1;
  thread_count().store(n);
  omp_set_num_threads(n);
}

}  // namespace tessera
