// What the trainer does between the last backward of a step and the next forward, behind one
// interface with two implementations: the plain path (plain_update.cc: DataParallel's all-reduce,
// an f32 master of every parameter, one optimizer over them) and ZeRO stages 1-3 (zero_update.cc,
// parallel/zero: masters and optimizer state sharded over the data group; stage 2 also gradients,
// stage 3 also parameters). Each hands out the optimizer's part of a checkpoint as an adapter of
// its own (optimizer_checkpoint.h), and ZeRO's lines for the run's header come from zero_report.h.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "models/train/optimizer_checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "parallel/comm/communicator.h"
#include "parallel/zero/stage3_params.h"

namespace tessera::train {

class UpdateEngine {
 public:
  virtual ~UpdateEngine() = default;

  // Before each micro-batch's backward: only the last one (sync) reduces gradients over ranks.
  virtual void set_grad_sync(bool sync) = 0;
  // Under set_grad_sync(false): spec.sync_groups[g] has its last backward next, so its reduction
  // may start within it (the plain path; ZeRO's reducer starts after the last backward).
  virtual void sync_group(size_t g) = 0;
  // After the last backward: the reduced gradients in f32 on step_params()' .grad().
  virtual void finish_gradients() = 0;
  // The f32 tensors optimizer() steps: every parameter's master, or this rank's shards.
  virtual const std::vector<Tensor>& step_params() const = 0;
  virtual optim::Optimizer& optimizer() = 0;
  // The optimizer step over step_params() without loss scaling: optimizer().step(), except after
  // ZeRO's overlapped step, which finish_gradients() already took.
  virtual void step() { optimizer().step(); }
  // Global-norm clipping (collective under ZeRO). counted[i]: model parameter i's gradient counts
  // on this rank (empty: all do); reduce sums a partial over the other groups that split the model
  // (tensor parallelism), empty when none does.
  virtual double clip_grad_norm(double max_norm, const std::vector<bool>& counted,
                                const optim::SumReducer& reduce) = 0;
  // After the step, taken or skipped: the model's parameters from the f32 values, no gradients.
  virtual void finish_step() = 0;

  // The optimizer's part of a checkpoint (optimizer_checkpoint.h).
  virtual OptimizerCheckpoint& checkpoint() = 0;

  // ZeRO stage 3: the window in which released parameters may be gathered, which every rank opens
  // around the same forward and backward passes (Stage3Params::GatherWindow); elsewhere nothing.
  [[nodiscard]] virtual parallel::zero::Stage3Params::GatherWindow gather_window() {
    return parallel::zero::Stage3Params::GatherWindow(nullptr);
  }
  // A line for the run's header ("" when there is nothing to say).
  virtual std::string describe() const = 0;
  // Once, after the first step: where ZeRO-3's auto placement put the parameter chunks ("" when
  // there is nothing to say).
  virtual std::string placement_report() const { return ""; }
  // After each step: numbers for the metrics file (ZeRO-3's auto placement: the chunk copies it
  // made and dropped within the step); empty when there are none.
  virtual nlohmann::json step_metrics() { return nlohmann::json::object(); }
};

struct UpdateEngineSpec {
  nn::Module* model = nullptr;
  std::vector<optim::ParamGroup> groups;  // over model->parameters()
  nlohmann::json optimizer;               // make_optimizer's JSON
  // Reduces gradients over the data-parallel ranks; null: one data rank and no ZeRO.
  std::shared_ptr<parallel::Communicator> grad_group;
  // The plain path: parameters whose gradient the caller completes after backward (a pipeline's
  // tied embedding), reduced after all others (DataParallelOptions::completed_after_backward).
  std::vector<std::string> completed_after_backward;
  // The plain path: parameter sets final at different times (a pipeline's model chunks), reduced
  // set by set from sync_group() on (DataParallelOptions::sync_groups).
  std::vector<std::vector<std::string>> sync_groups;
  int zero_stage = 0;                   // 0: the plain path; 1-3: ZeRO over grad_group
  bool zero_offload = false;            // ZeRO's masters and optimizer state on the host
  bool zero_overlap_step = false;       // offload, stages 2-3: the host steps during backward
  int64_t zero_bucket_bytes = 25 << 20;  // ZeRO's gradient buckets
  parallel::zero::Stage3Options zero3;  // stage 3: parameters kept gathered, prefetch depth
  // Stage 3 after a sharded build (zero_build.h): this rank's master shards; empty: taken from
  // the parameters.
  std::vector<Tensor> zero3_masters;
};

// Collective over spec.grad_group (parameter broadcast, layout check).
std::unique_ptr<UpdateEngine> make_update_engine(const UpdateEngineSpec& spec);

}  // namespace tessera::train
