// A one-line progress bar for long data jobs: done / total bytes, throughput and time left,
// redrawn in place on a terminal stream at most ten times a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace tessera::data {

class ProgressBar {
 public:
  // out may be null (no output). total_bytes may be 0 (the bar shows 100%).
  ProgressBar(std::ostream* out, std::string label, uint64_t total_bytes);
  void update(uint64_t done_bytes);
  // Draws the final state followed by `summary` and a newline.
  void finish(const std::string& summary);

  // The text of the bar for the given state (no carriage return), for tests and drawing.
  static std::string render(const std::string& label, uint64_t done, uint64_t total,
                            double seconds);

 private:
  void draw(uint64_t done, const std::string& suffix);

  std::ostream* out_;
  std::string label_;
  uint64_t total_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tessera::data
