// What a training run shows: rank 0's live progress line (step, loss, learning rate, throughput,
// ETA, peak memory; a GPU's current and peak memory when training there), evaluation lines, and the metrics file of JSON lines that
// tools/plot_metrics.py draws.
#pragma once

#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace tessera::train {

struct StepStats {
  int64_t step = 0;  // optimizer steps done, counting this one (1 for the first)
  double loss = 0;   // mean over the global batch
  double lr = 0;
  double grad_norm = -1;      // before clipping; < 0 when not computed
  double seconds = 0;         // wall time of this step
  int64_t units = 0;          // tokens or images in the global batch
  double loss_scale = 0;      // f16 runs; 0 otherwise
  int64_t skipped_steps = 0;  // f16 steps skipped for inf/NaN gradients, so far
  int64_t peak_bytes = 0;     // peak memory held by tensors on memory_device (core/allocator.h)
  // Every world rank's peak_bytes, indexed by world rank, so a layout's memory can be checked on
  // every rank from outside (the planner's validation). Gathered only for steps that write a
  // metrics record; empty otherwise (and then left out of the record).
  std::vector<int64_t> peak_bytes_ranks;
  // Where the model trains: "" or "cpu" (the line shows the CPU's peak), or a GPU ("cuda:0"), whose
  // current and peak bytes the line shows, since there device memory is what runs out.
  std::string memory_device = "cpu";
  int64_t current_bytes = 0;  // memory held on memory_device at the end of the step
  // The update engine's own numbers for this step (UpdateEngine::step_metrics), added to the
  // metrics record as they are.
  nlohmann::json engine = nlohmann::json::object();
};

struct ProgressOptions {
  std::ostream* out = nullptr;  // null: print nothing (other ranks)
  bool live = false;            // redraw one line in place (a terminal); else print every log_every
  int64_t log_every = 10;
  int64_t total_steps = 0;
  std::string unit = "tok";
  std::string metrics_path;  // JSON lines, appended; empty: none
};

class Progress {
 public:
  explicit Progress(const ProgressOptions& options);

  void step(const StepStats& s);
  // An evaluation's metrics ({"val_loss": ...}) and summary line.
  void eval(int64_t step, const nlohmann::json& metrics, const std::string& summary);
  // A line of its own (ends the live line first).
  void message(const std::string& line);
  // Ends the live line.
  void finish();

  // "1h02m", "3m05s", "42s".
  static std::string format_duration(double seconds);
  // "12.3k", "950", "1.20M".
  static std::string format_rate(double per_second);
  static std::string format_bytes(int64_t bytes);
  // The progress line for s (exposed for tests).
  std::string line(const StepStats& s) const;

 private:
  void write_metrics(const nlohmann::json& record);
  void end_live_line();

  ProgressOptions options_;
  std::unique_ptr<std::ofstream> metrics_;
  std::deque<double> recent_seconds_;  // the last few step times, for rate and ETA
  std::deque<int64_t> recent_units_;
  bool line_open_ = false;
};

// A resumed run's metrics file: keeps the records of steps <= `step` (those the checkpoint holds),
// drops the later ones the interrupted run wrote (and a torn last line), atomically. No file: no-op.
void truncate_metrics(const std::string& path, int64_t step);

}  // namespace tessera::train
