// The profiler: scopes record nothing while it is off, nested scopes split their time into
// exclusive shares that add up, events from several threads are kept apart, and the Chrome trace
// is valid JSON with one complete event per scope.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/profiler.h"

using namespace tessera;

namespace {
void busy_for(std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}
const profiler::FamilyTime* family(const std::vector<profiler::FamilyTime>& f, const char* name) {
  for (const auto& x : f)
    if (x.name == name) return &x;
  return nullptr;
}
}  // namespace

TEST_CASE("a scope records nothing while the profiler is off", "[core][profiler]") {
  REQUIRE_FALSE(profiler::enabled());
  { TS_PROFILE("ignored", "kernel"); }
  profiler::start();
  std::vector<profiler::Event> events = profiler::stop();
  CHECK(events.empty());
  { TS_PROFILE("after stop", "kernel"); }
  profiler::start();
  CHECK(profiler::stop().empty());
}

TEST_CASE("nested scopes get exclusive times that add up to the outer one", "[core][profiler]") {
  profiler::start();
  {
    TS_PROFILE("train_step", "step");
    busy_for(std::chrono::milliseconds(4));
    for (int i = 0; i < 3; ++i) {
      TS_PROFILE("linear", "kernel");
      busy_for(std::chrono::milliseconds(2));
    }
    { TS_PROFILE("all_reduce", "comm", 4096); }
  }
  const std::vector<profiler::Event> events = profiler::stop();
  REQUIRE(events.size() == 5);
  CHECK(events.front().name == "train_step");  // sorted by start
  const auto families = profiler::summarize(events);
  const auto* step = family(families, "train_step");
  const auto* linear = family(families, "linear");
  const auto* reduce = family(families, "all_reduce");
  REQUIRE((step && linear && reduce));
  CHECK(linear->calls == 3);
  CHECK(linear->self_ns >= 6'000'000);
  CHECK(step->self_ns >= 4'000'000);
  CHECK(reduce->bytes == 4096);
  CHECK(step->self_ns + linear->self_ns + reduce->self_ns == events.front().dur_ns);
  const std::string table = profiler::format_summary(families, events.front().dur_ns);
  CHECK(table.find("linear") != std::string::npos);
  CHECK(table.find("4096 bytes") != std::string::npos);
}

TEST_CASE("threads keep their own events; the trace is valid JSON", "[core][profiler]") {
  profiler::start();
  { TS_PROFILE("main \"quoted\"", "step"); }
  std::thread worker([] { TS_PROFILE("worker", "kernel"); });
  worker.join();
  const std::vector<profiler::Event> events = profiler::stop();
  REQUIRE(events.size() == 2);
  CHECK(events[0].thread != events[1].thread);
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/trace.json";
  profiler::write_chrome_trace(path, events, 3);
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  const auto& list = trace.at("traceEvents");
  REQUIRE(list.size() == 3);  // the process name, then the two scopes
  CHECK(list[1].at("ph") == "X");
  CHECK(list[1].at("pid") == 3);
  CHECK(list[1].at("name") == "main \"quoted\"");
  CHECK(list[2].at("cat") == "kernel");
}
