// Wall-clock timing protocol shared by every bench row (and mirrored in torch_peer.py): untimed
// warm-up calls, then repetitions until a time budget and a minimum count are met; the median.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <utility>
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

namespace detail {
inline double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace detail

// The median of `times` (the mean of the middle two for an even count; 0 when empty).
inline double median_of(std::vector<double> times) {
  if (times.empty()) return 0.0;
  const size_t mid = times.size() / 2;
  std::nth_element(times.begin(), times.begin() + mid, times.end());
  if (times.size() % 2 == 1) return times[mid];
  const double upper = times[mid];
  const double lower = *std::max_element(times.begin(), times.begin() + mid);
  return 0.5 * (lower + upper);
}

// Median is robust to the odd descheduled repetition on a shared machine.
inline double median_seconds(const std::function<void()>& fn, const TimingOptions& opts) {
  for (int i = 0; i < opts.warmup; ++i) fn();
  std::vector<double> times;
  double spent = 0.0;
  while (int(times.size()) < opts.max_reps &&
         (int(times.size()) < opts.min_reps || spent < opts.min_seconds)) {
    times.push_back(detail::seconds_of(fn));
    spent += times.back();
  }
  return median_of(std::move(times));
}

// How paired_median_seconds hands the machine from one side to the other. Two OpenMP runtimes in
// one process (ours, and a peer library's own copy in its dlmopen namespace) must not overlap:
// libgomp's idle threads spin for milliseconds after every parallel region, so a call timed right
// after the other side's would share the cores with its spinning threads (both sides measured at
// about half speed on 2 cores). With `settle_seconds` > 0 each side runs a block: a pause in which
// the other side's threads go to sleep, an untimed call that wakes its own, then timed calls for
// about `block_seconds`.
struct Handover {
  double settle_seconds = 0.0;
  double block_seconds = 0.0;
};

// Same-process peers with their own thread pool: a pause several times libgomp's spin, blocks
// long enough that the pause costs a fraction of the run.
inline Handover thread_pool_handover() { return {0.02, 0.1}; }

// The medians of two functions timed in alternation, a b a b ... (or in alternating blocks, see
// Handover), each repetition count and time budget as median_seconds's: a host whose speed drifts
// over seconds (a shared VM's clock, another tenant) then slows both alike, and their ratio stays
// meaningful.
inline std::pair<double, double> paired_median_seconds(const std::function<void()>& a,
                                                       const std::function<void()>& b,
                                                       const TimingOptions& opts,
                                                       const Handover& handover = {}) {
  for (int i = 0; i < opts.warmup; ++i) {
    a();
    b();
  }
  const bool blocks = handover.settle_seconds > 0.0;
  // One block of `fn`: its timed calls appended to `times`, their sum added to `spent`.
  auto run_block = [&](const std::function<void()>& fn, std::vector<double>& times,
                       double& spent) {
    if (blocks) {
      std::this_thread::sleep_for(std::chrono::duration<double>(handover.settle_seconds));
      fn();
    }
    double block = 0.0;
    do {
      times.push_back(detail::seconds_of(fn));
      block += times.back();
    } while (block < handover.block_seconds && int(times.size()) < opts.max_reps);
    spent += block;
  };
  std::vector<double> ta, tb;
  double spent_a = 0.0, spent_b = 0.0;
  while (int(std::min(ta.size(), tb.size())) < opts.max_reps &&
         (int(std::min(ta.size(), tb.size())) < opts.min_reps ||
          std::min(spent_a, spent_b) < opts.min_seconds)) {
    run_block(a, ta, spent_a);
    run_block(b, tb, spent_b);
  }
  return {median_of(std::move(ta)), median_of(std::move(tb))};
}

}  // namespace tessera::bench
