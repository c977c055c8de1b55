#include "core/parallel.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace tessera {
namespace {
int initial_threads() {
  if (const char* env = std::getenv("TESSERA_NUM_THREADS"); env && *env) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return omp_get_num_procs();
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

int num_threads() { return thread_count().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  if (n < 1) n = 1;
  thread_count().store(n);
  omp_set_num_threads(n);
}

}  // namespace tessera
