// Tessera's side of `bench pp`: a small GPT cut into the stages of a pipeline schedule over the
// world (a ParallelContext with parallel.pipeline = P), training steps run through
// PipelineExecutor::run, each step's action timings and allocator peak recorded on this rank.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/comm/communicator.h"
#include "parallel/pipeline/schedule.h"
#include "tools/bench/pp_plan.h"

namespace tessera::bench {

struct PpShape {
  int64_t blocks = 8;   // transformer blocks: enough for P * v stages (4 x 2)
  int64_t width = 128;  // d_model
  int64_t heads = 4;
  int64_t seq = 64;   // tokens per sequence
  int64_t micro = 2;  // sequences per micro-batch
  int64_t vocab = 256;
  int warmup = 2;  // untimed steps first (they also allocate the gradients)
  int steps = 10;  // measured steps
};

// warmup + steps training steps of `spec` (spec.stages = world->size()) on this rank; returns the
// measured ones. Collective over `world` (the context's groups, a barrier before each step).
// Gradients are zeroed in place between steps (no optimizer), so they are held before every
// measured step and activation_bytes counts what the step itself adds: activations, the zero
// bubble's deferred weight-gradient inputs, transfer buffers.
std::vector<StepRecord> measure_pp(const PpShape& shape,
                                   const parallel::pipeline::ScheduleSpec& spec,
                                   const std::shared_ptr<parallel::Communicator>& world);

}  // namespace tessera::bench
