#include "models/train/step_runner.h"

#include "autograd/engine.h"
#include "core/profiler.h"
#include "models/nn/dropout.h"

namespace tessera::train {

namespace {

class SerialStepRunner : public StepRunner {
 public:
  SerialStepRunner(Task& task, UpdateEngine& update, int64_t accumulation)
      : task_(task), update_(update), accumulation_(accumulation) {}

  double forward_backward(int64_t micro_batch, uint64_t dropout_key,
                          const std::function<Tensor(const Tensor&)>& to_backward) override {
    double loss_sum = 0;
    for (int64_t m = 0; m < accumulation_; ++m) {
      update_.set_grad_sync(m + 1 == accumulation_);  // only the last micro-batch reduces
      Tensor loss;
      {
        TS_PROFILE("forward", "step");
        nn::MicroBatchDropout keyed(dropout_key, uint64_t(m));
        loss = task_.micro_loss(micro_batch);
        loss_sum += loss.item();
      }
      TS_PROFILE("backward", "step");
      autograd::backward({to_backward(loss)});
    }
    return loss_sum;
  }

 private:
  Task& task_;
  UpdateEngine& update_;
  int64_t accumulation_;
};

class PipelinedStepRunner : public StepRunner {
 public:
  PipelinedStepRunner(PipelineStep& pipeline, UpdateEngine& update,
                      parallel::Communicator& pipeline_group)
      : pipeline_(pipeline), update_(update), pipeline_group_(pipeline_group) {}

  double forward_backward(int64_t micro_batch, uint64_t dropout_key,
                          const std::function<Tensor(const Tensor&)>& to_backward) override {
    // Gradients accumulate over the schedule and are reduced once: each model chunk's reduction
    // starts within its final backward (a no-op for reducers that start after the schedule, as
    // ZeRO's), the tied embedding's last (it is complete only once the end stages summed it).
    update_.set_grad_sync(false);
    double loss_sum;
    {
      TS_PROFILE("pipeline_schedule", "step");
      loss_sum = pipeline_.run(micro_batch, dropout_key, to_backward,
                               [&](int chunk) { update_.sync_group(size_t(chunk)); });
    }
    pipeline_.reduce_tied_gradients();
    update_.set_grad_sync(true);
    return sum_over_ranks(&pipeline_group_, {loss_sum})[0];
  }

 private:
  PipelineStep& pipeline_;
  UpdateEngine& update_;
  parallel::Communicator& pipeline_group_;
};

}  // namespace

std::unique_ptr<StepRunner> serial_step_runner(Task& task, UpdateEngine& update,
                                               int64_t accumulation) {
  return std::make_unique<SerialStepRunner>(task, update, accumulation);
}

std::unique_ptr<StepRunner> pipelined_step_runner(PipelineStep& pipeline, UpdateEngine& update,
                                                  parallel::Communicator& pipeline_group) {
  return std::make_unique<PipelinedStepRunner>(pipeline, update, pipeline_group);
}

}  // namespace tessera::train
