// The training loop behind `tessera train`: builds the model, optimizer, schedule, precision and
// data parallelism from a TrainConfig, resumes from the latest checkpoint, trains with gradient
// accumulation and clipping, evaluates, checkpoints, and reports progress on rank 0; on the CPU or,
// with train.device cuda, on one GPU per rank (train_device.h).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "models/train/train_config.h"
#include "parallel/comm/agreed.h"
#include "parallel/comm/communicator.h"

namespace tessera::train {

struct TrainerOptions {
  std::ostream* out = nullptr;  // rank 0's progress, evaluations and sample; null: silent
  bool live = false;            // redraw the progress line in place (stdout is a terminal)
  // SIGINT / SIGTERM: the first stops the run after the current step with a checkpoint (and a
  // ValueError naming the signal), a second exits at once. Off: the process's own handlers.
  bool handle_signals = false;
};

struct TrainSummary {
  int64_t start_step = 0;  // steps already done when this run began (from a checkpoint)
  int64_t end_step = 0;
  std::vector<double> losses;  // the global-batch loss of each step this run took
  nlohmann::json last_eval;    // metrics of the final evaluation (empty without held-out data)
  int64_t skipped_steps = 0;   // f16 steps skipped by the loss scaler, in total
  // The allocator's peak bytes (core/allocator.h) of every world rank at the end, by world rank,
  // and the largest of them.
  std::vector<int64_t> peak_bytes_ranks;
  int64_t peak_bytes = 0;
};

// Collective over `world` (every rank calls it; null: one process without MPI). Layout errors,
// parallel features that are not implemented yet, bad data and bad checkpoints throw ValueError
// on the lowest failing rank and a PeerError with the same message on every other rank
// (run_agreed), so every rank stops at the same point and run_distributed reports the mistake
// once. A non-finite loss throws (f32, bf16) or skips
// the step through the loss scaler (f16).
TrainSummary run_training(const TrainConfig& config, std::shared_ptr<parallel::Communicator> world,
                          const TrainerOptions& options = {});

// Runs fn() on every rank of comm; if it throws anywhere, every rank throws the lowest failing
// rank's message (parallel/comm/agreed.h).
using parallel::run_agreed;

}  // namespace tessera::train
