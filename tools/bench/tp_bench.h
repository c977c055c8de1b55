// Tessera's side of `bench tp`: one transformer block's forward + backward and one GPT training
// step (loss, backward, AdamW), built from a BuildContext (serial, or a twin over its tensor
// group), timed over repeats, with the group's collective counters and the allocator's memory.
#pragma once

#include <cstdint>

#include "models/gpt/gpt_config.h"
#include "models/nn/build_context.h"
#include "parallel/comm/communicator.h"

namespace tessera::bench {

struct TpShape {
  int64_t batch = 2;  // sequences per step, the same on every rank of the tensor group
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
  // The tensor group's counters over the last step: its forward, and the whole step (this rank's).
  parallel::CommStats forward, step;
};

// A pre-LN causal block (MLP 4C) on x (B, T, C), gradient of ones. `group` is the context's
// tensor group (null when serial: this rank alone). Collective over the group.
TpMeasured measure_tp_block(const TpShape& shape, const nn::BuildContext& ctx,
                            parallel::Communicator* group);
// A GPT of `config` on one random batch (B, T + 1) of ids, the same on every rank.
TpMeasured measure_tp_step(const TpShape& shape, const gpt::GPTConfig& config,
                           const nn::BuildContext& ctx, parallel::Communicator* group);

}  // namespace tessera::bench
