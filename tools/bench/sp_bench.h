// Tessera's side of `bench sp`: one GPT training step's forward + backward (no optimizer) under a
// layout of the world's ranks (one rank, the paper's sequence parallelism in a mode, or 1D tensor
// parallelism), and the activation memory it needs on each rank by the allocator's counters.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/gpt/gpt_config.h"
#include "parallel/comm/communicator.h"

namespace tessera::bench {

// How the world's N ranks split the model: one rank (the others wait), parallel.sequence = N in
// `mode`, or parallel.tensor.size = N in 1d mode.
struct SpLayout {
  enum class Kind : uint8_t { single, sequence, tensor } kind = Kind::single;
  std::string mode;  // sequence: ring, all_to_all or ring_flash
  // "one rank", "sp ring", "tp 1d", ...
  std::string name() const;
};

struct SpMeasured {
  int64_t activation_bytes =
      0;               // the step's allocator peak minus what it started with, busiest rank
  double seconds = 0;  // the step's wall time, slowest rank
};

// config (its context_length = seq) on `micro` random sequences of seq tokens, the same on every
// rank: a warm-up step at a short length allocates the gradients, then the measured step. Dropout
// off. Collective over `world` (every rank calls it; under Kind::single rank 0 computes alone).
SpMeasured measure_sp_step(const gpt::GPTConfig& config, int64_t micro, const SpLayout& layout,
                           const std::shared_ptr<parallel::Communicator>& world);

}  // namespace tessera::bench
