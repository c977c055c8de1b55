// Progress bar rendering (see progress.h).
#include "models/data/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera::data {

namespace {

std::string format_duration(double seconds) {
  const int64_t s = int64_t(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

}  // namespace

ProgressBar::ProgressBar(std::ostream* out, std::string label, uint64_t total_bytes)
    : out_(out),
      label_(std::move(label)),
      total_(total_bytes),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string ProgressBar::render(const std::string& label, uint64_t done, uint64_t total,
                                double seconds) {
  constexpr int kWidth = 24;
  const double frac = total == 0 ? 1.0 : std::min(1.0, double(done) / double(total));
  const int filled = int(frac * kWidth);
  const double mb = double(done) / 1e6, total_mb = double(total) / 1e6;
  const double rate = seconds > 0 ? mb / seconds : 0.0;
  const std::string eta =
      rate > 0 ? format_duration((total_mb - mb) / rate) : std::string(frac >= 1.0 ? "0:00" : "?");
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s [%s%s] %5.1f%% %.1f/%.1f MB %.1f MB/s ETA %s", label.c_str(),
                std::string(size_t(filled), '#').c_str(),
                std::string(size_t(kWidth - filled), '-').c_str(), 100.0 * frac, mb, total_mb, rate,
                eta.c_str());
  return buf;
}

void ProgressBar::draw(uint64_t done, const std::string& suffix) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  *out_ << '\r' << render(label_, done, total_, seconds) << suffix << std::flush;
}

void ProgressBar::update(uint64_t done_bytes) {
  if (out_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done_bytes, "");
}

void ProgressBar::finish(const std::string& summary) {
  if (out_ == nullptr) return;
  draw(total_, summary.empty() ? "\n" : "  " + summary + "\n");
}

}  // namespace tessera::data
