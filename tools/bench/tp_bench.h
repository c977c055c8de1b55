// Tessera's side of `bench tp`: one transformer block's forward + backward and one GPT training
// step (loss, backward, AdamW), built from a BuildContext (serial, or a twin in any tensor-parallel
// mode), timed over repeats, with the collective counters of every group the layout defines and
// the allocator's memory.
#pragma once

#include <cstdint>
#include <vector>

#include "models/gpt/gpt_config.h"
#include "models/nn/build_context.h"
#include "parallel/comm/communicator.h"

namespace tessera::bench {

struct TpShape {
  int64_t batch = 4;  // sequences per step, the same on every rank of the tensor group
  int64_t seq = 128;
  int64_t d_model = 768;  // the block's width (gpt2-124m's) and heads
  int64_t heads = 12;
  int repeats = 3;  // timed steps after one untimed warm-up step; the median is reported
};

// One measurement, the busiest rank's figure for each field (maximum over the group).
struct TpMeasured {
  double seconds = 0;            // median step time over the repeats, slowest rank
  int64_t param_bytes = 0;       // allocator bytes the model holds once built
  int64_t replicated_bytes = 0;  // of which replicated parameters (by placement)
  int64_t activation_bytes = 0;  // the forward's allocator peak minus what it started with
  int64_t peak_bytes = 0;        // allocator peak over one step
  // This rank's counters over the last step, summed over the layout's groups: its forward, and
  // the whole step.
  parallel::CommStats forward, step;
};

// The groups a layout's layers may use: `sync` (the tensor group) times the steps and takes the
// maxima, `counted` are read for the bytes (every group of the context, each communicator once).
// Default: serial, this rank alone.
struct TpGroups {
  parallel::Communicator* sync = nullptr;
  std::vector<parallel::Communicator*> counted;
};
// Every group of `ctx`'s parallel context (none when serial).
TpGroups tp_groups(const nn::BuildContext& ctx);

// A pre-LN causal block (MLP 4C) on x (B, T, C), gradient of ones; a 2D / 2.5D / 3D twin takes this
// rank's piece of x, cut locally. Collective over the context's groups.
TpMeasured measure_tp_block(const TpShape& shape, const nn::BuildContext& ctx);
// A GPT of `config` on one random batch (B, T + 1) of ids, the same on every rank.
TpMeasured measure_tp_step(const TpShape& shape, const gpt::GPTConfig& config,
                           const nn::BuildContext& ctx);

}  // namespace tessera::bench
