// The progress line and the metrics file (see progress.h).
#include "models/train/progress.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "models/io/atomic_file.h"

namespace tessera::train {

namespace {
constexpr size_t kWindow = 20;  // steps averaged for throughput and ETA

bool on_gpu(const StepStats& s) { return !s.memory_device.empty() && s.memory_device != "cpu"; }
}  // namespace

Progress::Progress(const ProgressOptions& options) : options_(options) {
  if (!options_.metrics_path.empty()) {
    const std::filesystem::path parent = std::filesystem::path(options_.metrics_path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    metrics_ = std::make_unique<std::ofstream>(options_.metrics_path, std::ios::app);
    TS_CHECK(metrics_->good(), "train", "logging.metrics: cannot open '", options_.metrics_path,
             "' for writing");
  }
}

std::string Progress::format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t total = int64_t(std::llround(s));
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(total / 3600),
                  (long long)(total % 3600 / 60));
  else if (total >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(total / 60),
                  (long long)(total % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", (long long)total);
  return buf;
}

std::string Progress::format_rate(double r) {
  char buf[32];
  if (r >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", r / 1e6);
  else if (r >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1fk", r / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", r);
  return buf;
}

std::string Progress::format_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1 << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  return buf;
}

std::string Progress::line(const StepStats& s) const {
  const double secs = std::accumulate(recent_seconds_.begin(), recent_seconds_.end(), 0.0);
  const double units =
      double(std::accumulate(recent_units_.begin(), recent_units_.end(), int64_t(0)));
  const double rate = secs > 0 ? units / secs : 0;
  const double per_step = recent_seconds_.empty() ? 0 : secs / double(recent_seconds_.size());
  const int width = int(std::to_string(options_.total_steps).size());
  const std::string memory =
      on_gpu(s) ? s.memory_device + " " + format_bytes(s.current_bytes) + " (peak " +
                      format_bytes(s.peak_bytes) + ")"
                : format_bytes(s.peak_bytes);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "step %*lld/%lld | loss %.4f | lr %.2e | %s %s/s | eta %s | mem %s", width,
                (long long)s.step, (long long)options_.total_steps, s.loss, s.lr,
                format_rate(rate).c_str(), options_.unit.c_str(),
                format_duration(per_step * double(options_.total_steps - s.step)).c_str(),
                memory.c_str());
  std::string out = buf;
  if (s.loss_scale > 0) {
    std::snprintf(buf, sizeof buf, " | scale %g | skipped %lld", s.loss_scale,
                  (long long)s.skipped_steps);
    out += buf;
  }
  return out;
}

void Progress::step(const StepStats& s) {
  recent_seconds_.push_back(s.seconds);
  recent_units_.push_back(s.units);
  if (recent_seconds_.size() > kWindow) {
    recent_seconds_.pop_front();
    recent_units_.pop_front();
  }
  nlohmann::json record = {{"step", s.step},
                           {"loss", s.loss},
                           {"lr", s.lr},
                           {"step_seconds", s.seconds},
                           {"units", s.units},
                           {"unit", options_.unit},
                           {"throughput", s.seconds > 0 ? double(s.units) / s.seconds : 0.0},
                           {"peak_bytes", s.peak_bytes}};
  if (!s.peak_bytes_ranks.empty()) record["peak_bytes_ranks"] = s.peak_bytes_ranks;
  if (on_gpu(s)) {
    record["memory_device"] = s.memory_device;
    record["current_bytes"] = s.current_bytes;
  }
  if (s.grad_norm >= 0) record["grad_norm"] = s.grad_norm;
  if (s.loss_scale > 0) {
    record["loss_scale"] = s.loss_scale;
    record["skipped_steps"] = s.skipped_steps;
  }
  record.update(s.engine);
  write_metrics(record);
  if (!options_.out) return;
  const bool commit =
      s.step % options_.log_every == 0 || s.step == options_.total_steps || s.step == 1;
  if (options_.live) {
    *options_.out << "\r\033[K" << line(s);
    line_open_ = true;
    if (commit) end_live_line();
    options_.out->flush();
  } else if (commit) {
    *options_.out << line(s) << "\n";
    options_.out->flush();
  }
}

void Progress::eval(int64_t step, const nlohmann::json& metrics, const std::string& summary) {
  nlohmann::json record = metrics;
  record["step"] = step;
  record["eval"] = true;
  write_metrics(record);
  message("eval at step " + std::to_string(step) + " | " + summary);
}

void Progress::message(const std::string& text) {
  if (!options_.out) return;
  end_live_line();
  *options_.out << text << "\n";
  options_.out->flush();
}

void Progress::finish() {
  if (options_.out) end_live_line();
}

void Progress::end_live_line() {
  if (!line_open_) return;
  *options_.out << "\n";
  line_open_ = false;
}

void Progress::write_metrics(const nlohmann::json& record) {
  if (!metrics_) return;
  *metrics_ << record.dump() << "\n";
  metrics_->flush();
}

void truncate_metrics(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in.good()) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.contains("step") && record["step"].is_number_integer() &&
        record["step"].get<int64_t>() <= step)
      kept += line + "\n";
  }
  in.close();
  io::write_file_atomic(path, kept);
}

}  // namespace tessera::train
