// A per-rank record of where a training step's time goes, for `train.profile` and
// `tessera bench train --profile`: scopes around kernels (kernels/kernels.cc), backward nodes
// (autograd/engine.cc), the trainer's phases and collectives, kept as events that
// write_chrome_trace() turns into a Chrome trace (Perfetto and chrome://tracing open it) and
// summarize() into time per family.
//
//   profiler::start();
//   { TS_PROFILE("optimizer", "step"); optimizer.step(); }
//   std::vector<profiler::Event> events = profiler::stop();
//
// Off by default. A scope while off costs one relaxed atomic load and a branch (no clock read, no
// allocation), so the instrumentation stays in release builds. While on, events go to a
// per-thread buffer; start() and stop() are called between steps, when no other thread records.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::profiler {

struct Event {
  std::string name;      // "linear", "LinearBackward", "optimizer", "all_reduce"
  const char* category;  // "kernel", "backward", "step", "comm" (a string literal)
  int64_t start_ns = 0;  // since start()
  int64_t dur_ns = 0;
  int64_t bytes = 0;     // payload of a collective, else 0
  int thread = 0;        // small per-thread id, in the order threads first recorded
};

namespace detail {
extern std::atomic<bool> g_enabled;
int64_t now_ns();
void record(Event&& event);
}  // namespace detail

inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// Clears every buffer and starts recording (timestamps count from here).
void start();
// Stops recording and returns the events of every thread, by start time.
std::vector<Event> stop();

// Times its lifetime as one event. `name` and `category` must outlive the scope (literals, or a
// string the caller keeps); the name is copied only when recording.
class Scope {
 public:
  Scope(const char* name, const char* category, int64_t bytes = 0) {
    if (enabled()) begin(name, category, bytes);
  }
  ~Scope() {
    if (name_ != nullptr) end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void begin(const char* name, const char* category, int64_t bytes);
  void end();
  const char* name_ = nullptr;
  const char* category_ = nullptr;
  int64_t bytes_ = 0;
  int64_t start_ns_ = 0;
};

// Chrome trace JSON ("traceEvents" of complete "X" events, microseconds), process id `rank`;
// a collective's bytes appear in its args. Written atomically (a temporary file, then renamed).
void write_chrome_trace(const std::string& path, const std::vector<Event>& events, int rank);

// Time per (category, name), exclusive of the scopes nested inside it on the same thread, so the
// rows add up to the time covered.
struct FamilyTime {
  std::string category, name;
  int64_t calls = 0;
  int64_t self_ns = 0;
  int64_t bytes = 0;
};
std::vector<FamilyTime> summarize(const std::vector<Event>& events);

// The table `train.profile` prints: the step phases and the heaviest families, each with its
// share of `step_ns` (the steps' total time), at most `rows` kernel and backward rows.
std::string format_summary(const std::vector<FamilyTime>& families, int64_t step_ns, int rows = 20);

}  // namespace tessera::profiler

#define TS_PROFILE_CONCAT2(a, b) a##b
#define TS_PROFILE_CONCAT(a, b) TS_PROFILE_CONCAT2(a, b)
// TS_PROFILE("name", "category"): times the rest of the enclosing block.
#define TS_PROFILE(...) \
  ::tessera::profiler::Scope TS_PROFILE_CONCAT(ts_profile_scope_, __LINE__)(__VA_ARGS__)
