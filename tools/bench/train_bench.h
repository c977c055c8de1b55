// Times Tessera's GPT training step (forward, backward, AdamW step) on one batch shape and
// measures its memory: the CPU allocator's peak and the process's peak RSS.
#pragma once

#include <cstdint>
#include <string>

#include "models/gpt/gpt_config.h"

namespace tessera::bench {

struct TrainShape {
  int64_t batch = 4;
  int64_t seq = 64;
};

struct TrainBenchOptions {
  int warmup = 2;  // untimed steps: Adam state, allocator and packing buffers, thread start-up
  int steps = 5;   // timed steps; the median is reported
  double lr = 1e-4;
  double weight_decay = 0.01;  // PyTorch's AdamW default, so both sides run the same update
  // Non-empty: after the timed steps, one more step is recorded by core/profiler.h and written as
  // a Chrome trace to this path ("trace.json" becomes "trace.4x64.json" for shape 4 x 64).
  std::string profile_path;
};

struct TrainStepResult {
  double step_seconds = 0;     // median over the timed steps
  int64_t peak_alloc_bytes = 0;  // memory_stats(kCPU).peak_bytes from model build to the last step
  int64_t peak_rss_bytes = 0;  // VmHWM over the same span (reset before the model is built)
  double last_loss = 0;
  std::string profile_report;  // with opts.profile_path: the trace's path and time per family
};

// Builds a fresh GPT (fixed seed) and an AdamW over its parameters, then runs warmup + steps
// training steps on one random batch (B, T) of token ids. Throws tessera::Error when the shape
// does not fit the config (T > context_length) or a step yields a non-finite loss.
TrainStepResult time_train_step(const gpt::GPTConfig& config, const TrainShape& shape,
                                const TrainBenchOptions& opts);

}  // namespace tessera::bench
