// Wall-clock timing protocol shared by every bench row (and mirrored in torch_peer.py): untimed
// warm-up calls, then repetitions until a time budget and a minimum count are met; the median.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace tessera::bench {

struct TimingOptions {
  int warmup = 2;            // untimed calls: page faults, packing buffers, thread start-up
  double min_seconds = 0.4;  // keep repeating until this much time is spent...
  int min_reps = 5;          // ...and at least this many timed calls were made
  int max_reps = 1000;
};

// Few repetitions, for smoke tests: numbers are rough but every code path runs.
inline TimingOptions quick_timing() { return {1, 0.02, 2, 20}; }

// Median is robust to the odd descheduled repetition on a shared machine.
inline double median_seconds(const std::function<void()>& fn, const TimingOptions& opts) {
  for (int i = 0; i < opts.warmup; ++i) fn();
  std::vector<double> times;
  double spent = 0.0;
  while (int(times.size()) < opts.max_reps &&
         (int(times.size()) < opts.min_reps || spent < opts.min_seconds)) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    times.push_back(s);
    spent += s;
  }
  if (times.empty()) return 0.0;
  const size_t mid = times.size() / 2;
  std::nth_element(times.begin(), times.begin() + mid, times.end());
  if (times.size() % 2 == 1) return times[mid];
  const double upper = times[mid];
  const double lower = *std::max_element(times.begin(), times.begin() + mid);
  return 0.5 * (lower + upper);
}

}  // namespace tessera::bench
