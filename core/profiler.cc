// The profiler's buffers, the Chrome trace writer and the per-family summary (see profiler.h).
#include "core/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/error.h"

namespace tessera::profiler {
namespace detail {

std::atomic<bool> g_enabled{false};

namespace {

using Clock = std::chrono::steady_clock;

struct Buffer {
  int thread = 0;
  std::vector<Event> events;
};

// Every thread's buffer, owned here too, so a thread that ends keeps its events until stop().
struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Buffer>> buffers;
  Clock::time_point origin = Clock::now();
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: threads may record during exit
  return *r;
}

Buffer& this_thread_buffer() {
  thread_local std::shared_ptr<Buffer> buffer = [] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto b = std::make_shared<Buffer>();
    b->thread = int(r.buffers.size());
    r.buffers.push_back(b);
    return b;
  }();
  return *buffer;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - registry().origin)
      .count();
}

void record(Event&& event) {
  Buffer& b = this_thread_buffer();
  event.thread = b.thread;
  b.events.push_back(std::move(event));
}

}  // namespace detail

void start() {
  detail::Registry& r = detail::registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const auto& b : r.buffers) b->events.clear();
    r.origin = detail::Clock::now();
  }
  detail::g_enabled.store(true, std::memory_order_relaxed);
}

std::vector<Event> stop() {
  detail::g_enabled.store(false, std::memory_order_relaxed);
  detail::Registry& r = detail::registry();
  std::vector<Event> all;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const auto& b : r.buffers) {
      std::move(b->events.begin(), b->events.end(), std::back_inserter(all));
      b->events.clear();
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  return all;
}

void Scope::begin(const char* name, const char* category, int64_t bytes) {
  name_ = name;
  category_ = category;
  bytes_ = bytes;
  start_ns_ = detail::now_ns();
}

void Scope::end() {
  const int64_t end_ns = detail::now_ns();
  detail::record(Event{.name = name_,
                       .category = category_,
                       .start_ns = start_ns_,
                       .dur_ns = end_ns - start_ns_,
                       .bytes = bytes_});
}

namespace {

std::string json_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void write_chrome_trace(const std::string& path, const std::vector<Event>& events, int rank) {
  const std::string tmp = path + ".tmp";
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TS_CHECK(out.good(), "profiler", "cannot write the trace to ", tmp);
    out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}",
                  rank, rank);
    out << buf;
    for (const Event& e : events) {
      std::snprintf(buf, sizeof buf, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,",
                    rank, e.thread, double(e.start_ns) / 1e3, double(e.dur_ns) / 1e3);
      out << buf << "\"cat\":\"" << e.category << "\",\"name\":\"" << json_escaped(e.name) << "\"";
      if (e.bytes > 0) out << ",\"args\":{\"bytes\":" << e.bytes << "}";
      out << "}";
    }
    out << "\n]}\n";
    out.flush();
    TS_CHECK(out.good(), "profiler", "writing the trace to ", tmp, " failed");
  }
  TS_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "profiler", "cannot rename ", tmp, " to ",
           path);
}

std::vector<FamilyTime> summarize(const std::vector<Event>& events) {
  // Exclusive time: each event's duration less that of the events directly nested in it (same
  // thread, inside its interval). Walk each thread's events by start, parents before children.
  std::vector<size_t> order(events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Event &x = events[a], &y = events[b];
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.dur_ns > y.dur_ns;
  });
  std::vector<int64_t> self(events.size());
  std::vector<size_t> open;  // the enclosing events of the current one
  int thread = -1;
  for (size_t i : order) {
    const Event& e = events[i];
    if (e.thread != thread) open.clear(), thread = e.thread;
    while (!open.empty() &&
           events[open.back()].start_ns + events[open.back()].dur_ns <= e.start_ns)
      open.pop_back();
    self[i] = e.dur_ns;
    if (!open.empty()) self[open.back()] -= e.dur_ns;
    open.push_back(i);
  }
  std::map<std::pair<std::string, std::string>, FamilyTime> by_family;
  for (size_t i = 0; i < events.size(); ++i) {
    FamilyTime& f = by_family[{events[i].category, events[i].name}];
    f.category = events[i].category;
    f.name = events[i].name;
    ++f.calls;
    f.self_ns += self[i];
    f.bytes += events[i].bytes;
  }
  std::vector<FamilyTime> out;
  for (auto& [key, f] : by_family) out.push_back(std::move(f));
  std::sort(out.begin(), out.end(),
            [](const FamilyTime& a, const FamilyTime& b) { return a.self_ns > b.self_ns; });
  return out;
}

std::string format_summary(const std::vector<FamilyTime>& families, int64_t step_ns, int rows) {
  std::ostringstream os;
  char line[200];
  auto row = [&](const FamilyTime& f) {
    std::snprintf(line, sizeof line, "  %-9s %-34s %8lld %11.2f %6.1f%%", f.category.c_str(),
                  f.name.substr(0, 34).c_str(), static_cast<long long>(f.calls),
                  double(f.self_ns) / 1e6,
                  step_ns > 0 ? 100.0 * double(f.self_ns) / double(step_ns) : 0.0);
    os << line;
    if (f.bytes > 0) os << "  " << f.bytes << " bytes";
    os << "\n";
  };
  std::snprintf(line, sizeof line, "  %-9s %-34s %8s %11s %7s\n", "category", "name", "calls",
                "self ms", "share");
  os << line;
  int shown = 0;
  int64_t rest = 0, rest_calls = 0;
  for (const FamilyTime& f : families) {
    const bool phase = f.category == "step";  // every phase row is shown
    if (phase || shown < rows) {
      row(f);
      if (!phase) ++shown;
    } else {
      rest += f.self_ns;
      rest_calls += f.calls;
    }
  }
  if (rest > 0) row(FamilyTime{.category = "other", .name = "(the remaining families)",
                               .calls = rest_calls, .self_ns = rest});
  return os.str();
}

}  // namespace tessera::profiler
