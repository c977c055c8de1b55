// One of the planner's layouts run for real for `tessera plan validate`: its config written as a
// short run (nothing saved, evaluated or sampled; every step's metrics with every rank's peak),
// `mpirun -np N tessera train` on it with the output in a log, and what its metrics file measured.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "models/plan/plan.h"
#include "models/plan/validation.h"
#include "models/train/train_config.h"

namespace tessera::cli {

// Dropped from a run's median step time: the first steps allocate, fault pages in and (ZeRO-3's
// auto placement) trace.
inline constexpr int kWarmupSteps = 2;

struct RunOptions {
  std::string self;  // the tessera binary the ranks run
  int world = 1;
  int steps = 8;
  double timeout_s = 900;     // then the run is stopped and reported as failed
  std::filesystem::path dir;  // the runs' configs, logs and metrics files
};

// One layout: the planner's prediction and, when its run succeeded, the measurement.
struct LayoutRun {
  size_t plan_rank = 0;  // 0-based position in the planner's ranking
  plan::Prediction predicted;
  std::string text;  // plan::layout_text
  bool ok = false;
  std::string failure;  // why not: train's refusal, or the exit code and the log's last lines
  plan::Measurement measured;
  double seconds = 0;  // wall time of the whole run (start-up, build, steps, exit)
  // The host's 1-minute load average as the run ended: work beside the run on these cores slows
  // its measured steps, so a reader can tell a planner's error from a busy machine.
  double load_average = 0;
};

// Never throws for a failed run: the failure is in the result, so one bad layout leaves the others'
// numbers standing.
LayoutRun run_layout(const train::TrainConfig& config, const plan::Prediction& predicted,
                     size_t plan_rank, const RunOptions& options);

}  // namespace tessera::cli
