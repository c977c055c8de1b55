// How one optimizer step's forwards and backwards run, behind one call (as Megatron's
// get_forward_backward_func): serially, micro-batch after micro-batch with the gradient reduction
// started by the last backward, or through the pipeline's schedule with each chunk's reduction
// started by its final backward and the tied weights' gradients summed between the end stages.
// The training loop sees neither.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/tensor.h"
#include "models/train/pipeline_step.h"
#include "models/train/task.h"
#include "models/train/update_engine.h"

namespace tessera::train {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // The step's `accumulation` micro-batches of `micro_batch` rows: forwards, backwards (to_backward
  // turns a micro-batch's mean loss into what is backpropagated: the accumulation mean, the loss
  // scale), gradients accumulated and their reduction started. Micro-batch m draws its dropout
  // masks under nn::MicroBatchDropout(dropout_key, m). Returns the sum of the micro-batches' mean
  // losses this rank's replica saw (on every pipeline stage).
  virtual double forward_backward(int64_t micro_batch, uint64_t dropout_key,
                                  const std::function<Tensor(const Tensor&)>& to_backward) = 0;
};

// Serial: the task's micro-batch losses, backward after each. update: its gradient sync is
// turned off for all but the last micro-batch.
std::unique_ptr<StepRunner> serial_step_runner(Task& task, UpdateEngine& update,
                                               int64_t accumulation);
// Pipelined: the schedule of `pipeline` (its micro-batches are the accumulation ones); the loss is
// summed over the pipeline group (only the last stage computes it).
std::unique_ptr<StepRunner> pipelined_step_runner(PipelineStep& pipeline, UpdateEngine& update,
                                                  parallel::Communicator& pipeline_group);

}  // namespace tessera::train
