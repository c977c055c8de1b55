// The trainer's pipeline-parallel step: the accumulation micro-batches streamed through the
// schedule of parallel.pipeline (parallel/pipeline/executor.h), the loss summed on the last stage,
// and the tied embedding's gradient summed between the first and last stage (over the embedding
// group). Which copy of a tied weight counts is param_copies.h's rule.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/train/task.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/pipeline/executor.h"

namespace tessera::train {

class PipelineStep {
 public:
  // Collective-free. The task's model must be pipelined (task.pipeline_stage() not null); device:
  // where the stage computes (what it receives is allocated there).
  PipelineStep(Task& task, const parallel::ParallelContext& context, int micro_batches,
               Device device);

  // One step's forwards and backwards over `micro_batch`-row micro-batches; to_backward turns a
  // micro-batch's mean loss into what is backpropagated (the accumulation mean, the loss scale).
  // before_chunk_final_backward (optional) runs with a local model chunk just before that chunk's
  // last backward work, after which its parameters get no more gradient: the trainer starts the
  // chunk's data-parallel reduction there (chunk_parameters() are its sync groups), so it overlaps
  // with the backward still to come, as Megatron's does, chunk by chunk under interleaving.
  // Returns the sum of the micro-batches' mean losses on the last stage, 0 elsewhere.
  // dropout_key: micro-batch m's forwards draw their masks under nn::MicroBatchDropout(key, m).
  double run(int64_t micro_batch, uint64_t dropout_key,
             const std::function<Tensor(const Tensor&)>& to_backward,
             const std::function<void(int chunk)>& before_chunk_final_backward = {});
  // The model's parameters by local chunk (nn::PipelineStage::chunk_parameters), without the tied
  // ones (see tied_parameters_held): DataParallelOptions::sync_groups.
  std::vector<std::vector<std::string>> chunk_parameters() const;
  // Sums the tied parameters' gradients between the first and the last stage (after run). Sums
  // commute with the data-parallel average, so the reducer may take these after it (see
  // tied_parameters_held).
  void reduce_tied_gradients();
  // The tied parameters this stage holds (the first and the last stage; none elsewhere): their
  // gradients are complete only after reduce_tied_gradients, so the data-parallel reducer takes
  // them last (DataParallelOptions::completed_after_backward).
  std::vector<std::string> tied_parameters_held() const;

  parallel::pipeline::PipelineExecutor& executor() { return *executor_; }
  // "pipeline: 1f1b over 2 stages, blocks [0,2) [2,4), 4 micro-batches" for the run's header.
  std::string describe() const;

 private:
  Task& task_;
  const parallel::ParallelContext& context_;
  std::unique_ptr<parallel::pipeline::PipelineExecutor> executor_;
};

}  // namespace tessera::train
