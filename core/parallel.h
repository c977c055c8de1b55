// The CPU thread-count knob (TESSERA_NUM_THREADS, default: all cores) and a parallel-for over
// OpenMP that stays serial for small work.
#pragma once

#include <cstdint>

namespace tessera {

// The first call reads TESSERA_NUM_THREADS (see env_num_threads; a bad value throws from here).
int num_threads();
void set_num_threads(int n);

// The thread count TESSERA_NUM_THREADS asks for, read now: 0 when it is unset or empty. Throws
// ValueError naming the variable for anything but a positive integer ("abc", "0", "-2", "4x").
int env_num_threads();

// Calls fn(begin, end) on disjoint chunks of [0, n); chunks hold at least `grain` items.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  int threads = num_threads();
  int64_t max_chunks = grain > 0 ? (n + grain - 1) / grain : n;
  int64_t chunks = threads < max_chunks ? threads : max_chunks;
  if (chunks <= 1) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

}  // namespace tessera
