// The trainer's class, shared by trainer.cc (setup, the step, evaluation, progress, the loop) and
// trainer_checkpoints.cc (saving, resuming and initial weights in both checkpoint formats). Internal
// to models/train: users reach it through run_training and Engine (trainer.h, engine.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/io/checkpoint.h"
#include "models/io/piece_checkpoint.h"
#include "models/train/auto_layout.h"
#include "models/train/checkpoint_root.h"
#include "models/train/interrupt.h"
#include "models/train/pipeline_state.h"
#include "models/train/pipeline_step.h"
#include "models/train/param_copies.h"
#include "models/train/progress.h"
#include "models/train/step_runner.h"
#include "models/train/task.h"
#include "models/train/train_config.h"
#include "models/train/trainer.h"
#include "models/train/update_engine.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/comm/communicator.h"
#include "parallel/mesh/parallel_context.h"

namespace tessera::train::detail {

using nlohmann::json;

DType precision_dtype(const std::string& name);
// Rank-dependent so dropout masks differ across data-parallel ranks.
uint64_t rng_seed(const TrainConfig& c, int64_t data_rank);

// Builds the run's task: the bundled GPT, BERT or ViT (make_task) or a user's recipe.
using TaskFactory = std::function<std::unique_ptr<Task>(const TaskContext&)>;

class Trainer {
 public:
  // Collective: builds everything and resumes (setup).
  Trainer(const TrainConfig& config, std::shared_ptr<parallel::Communicator> world,
          const TrainerOptions& options, TaskFactory make)
      : config_(config), world_(std::move(world)), options_(options), make_task_(std::move(make)) {
    if (options_.handle_signals) interrupts_.emplace();
    setup();
  }

  TrainSummary run();
  // One step with its progress line (the loop's body without its evaluations and checkpoints).
  double step_once();
  void evaluate_now() { evaluate(step_); }
  void save_now() { save(step_); }
  int64_t steps_done() const { return step_; }
  Task& task() { return *task_; }
  const EvalResult& last_eval() const { return last_eval_; }

 private:
  // setup() and its steps, in order; each returns what it builds.
  void setup();
  std::unique_ptr<CheckpointRoot> lock_checkpoint_dir() const;
  std::unique_ptr<parallel::ParallelContext> make_context() const;
  // The task and, for ZeRO-3's sharded build, this rank's master shards.
  std::pair<std::unique_ptr<Task>, std::vector<Tensor>> build_task();
  std::unique_ptr<UpdateEngine> make_update(std::vector<Tensor> zero_masters);
  std::unique_ptr<optim::DynamicLossScaler> make_loss_scaler() const;
  void load_initial_state();
  std::unique_ptr<Progress> make_progress() const;

  void resume(const std::string& dir);
  // model.init_from {"hf": DIR} (init_from.h); a no-op when the run resumes from a checkpoint.
  void init_from_hf(const std::string& dir);
  void save(int64_t step);
  // checkpoint.format "sharded" (models/io/piece_checkpoint.h): every rank writes the pieces it
  // owns; a resume reads only the pieces this rank's layout needs, from any layout's checkpoint.
  void save_sharded(int64_t step);
  void resume_sharded(const std::string& dir);
  // The pieces this rank writes.
  std::vector<io::PieceWrite> owned_pieces();
  // state.json's trainer section, and restoring a run from it (both formats).
  json train_state(int64_t step, const json& optimizer_meta) const;
  void restore_run_state(const json& s, const std::string& dir);
  void check_finite_weights(int64_t step);
  void check_skips(bool skipped, int64_t step);
  int agreed_signal();
  [[noreturn]] void stop_on_signal(int signal);
  double train_step(int64_t step, StepStats& stats);
  double agreed_loss(double local_loss, int64_t step);
  double clip_gradients(int64_t step, double loss);
  void evaluate(int64_t step);
  void header();
  std::ostream* out() const { return rank0() ? options_.out : nullptr; }
  bool rank0() const { return !world_ || world_->rank() == 0; }
  bool tensor_parallel() const { return config_.parallel.tensor.size > 1; }
  bool pipelined() const { return config_.parallel.pipeline > 1; }
  // ZeRO stage 3 with zero.sharded_init over a data group (models/train/zero_build.h).
  bool sharded_build() const {
    return config_.zero.stage == 3 && config_.zero.sharded_init && context_ != nullptr;
  }
  // The optimizer's parameter groups (weight decay off for biases and norms).
  std::vector<optim::ParamGroup> param_groups(const nn::Module& model) const;
  // Pipeline checkpoints: the optimizer's numbering of this stage's and of the serial model's
  // parameters, and this stage's tensors of a serial checkpoint.
  ParamOrder local_order() const;
  ParamOrder serial_order() const;
  io::NamedTensors stage_tensors(const io::NamedTensors& serial, const std::string& dir) const;
  // The ranks holding replicas of this rank's part of the model, which average their gradients:
  // the data group, and under sequence parallelism data x sequence (each sequence rank sees its
  // own tokens of the same batch).
  const std::shared_ptr<parallel::Communicator>& replica_group() const {
    return context_->group(config_.parallel.sequence > 1 ? "data_sequence" : "data");
  }
  parallel::Communicator* data_group() const { return context_ ? replica_group().get() : nullptr; }
  int64_t replicas() const { return int64_t(config_.parallel.data) * config_.parallel.sequence; }

  TrainConfig config_;
  std::shared_ptr<parallel::Communicator> world_;
  TrainerOptions options_;
  TaskFactory make_task_;
  EvalResult last_eval_;
  bool header_shown_ = false;
  bool placement_reported_ = false;
  int64_t accum_ = 1;
  int64_t data_rank_ = 0;
  Device device_ = kCPU;
  std::unique_ptr<parallel::ParallelContext> context_;
  Generator init_gen_;
  std::unique_ptr<Task> task_;
  // Gradient reduction, f32 masters, the optimizer and its checkpoint state: plain or ZeRO.
  std::unique_ptr<UpdateEngine> update_;
  std::unique_ptr<PipelineStep> pipeline_;  // parallel.pipeline > 1
  std::unique_ptr<StepRunner> runner_;      // the step's forwards and backwards
  std::optional<ParamCopies> copies_;       // which copies count (clipping, checkpoints)
  std::optional<optim::LrSchedule> schedule_;
  std::unique_ptr<optim::DynamicLossScaler> scaler_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<CheckpointRoot> checkpoint_root_;  // rank 0 with a checkpoint.dir
  std::optional<InterruptWatch> interrupts_;
  std::vector<std::string> resume_notes_;  // settings changed since the checkpoint
  int64_t skipped_in_a_row_ = 0;
  int64_t step_ = 0;
  int64_t units_seen_ = 0;
  std::string resumed_from_;
  TrainSummary summary_;
  std::optional<AutoLayout> auto_layout_;  // "parallel": "auto": the planner's choice
  std::vector<double> step_seconds_;       // this run's step times, for the plan's comparison
};

}  // namespace tessera::train::detail
