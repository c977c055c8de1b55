// The training engine: one interface that trains a model written as serial code under any layout
// the configuration asks for (data, pipeline and tensor parallelism in every mode, ZeRO 1-3 with
// offload, mixed precision), with evaluation, portable checkpoints, resume and metrics. The
// bundled GPT, BERT and ViT trainers (`tessera train`, run_training) are this engine with their
// own tasks; a user's model comes in as a ModelRecipe:
//
//   train::ModelRecipe recipe;
//   recipe.name = "mixer";
//   recipe.build = [](const nn::BuildContext& ctx, const nlohmann::json& options) {
//     return std::make_shared<Mixer>(MixerConfig::from_json(options), ctx);  // nn factories inside
//   };
//   recipe.loss = [](nn::Module& m, const train::Batch& b) {
//     return static_cast<Mixer&>(m).loss(b.input, b.target);
//   };
//   recipe.train_data = [&](const train::DataShard& s) { return train::lm_batches(config, s); };
//   train::Engine engine(config, recipe, world);   // config: model.type "custom"
//   engine.fit();
//
// A model that wants pipeline stages plans and declares them as the bundled models do
// (nn::PipelineStage::plan / hold / skip / build_blocks, nn::enter_dropout_unit) and implements
// StagedModel; under the paper's sequence parallelism it embeds and scores its own positions
// (nn::SequenceShard::take / positions). Every other strategy needs nothing from the model but
// that it builds its layers with the models/nn factories (factory.h), which return the parallel
// twins the layout asks for. Megatron's sequence_parallel is refused for a custom model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/nn/build_context.h"
#include "models/nn/module.h"
#include "models/nn/pipeline_stage.h"
#include "models/train/task.h"
#include "models/train/train_config.h"
#include "models/train/trainer.h"
#include "parallel/comm/communicator.h"

namespace tessera::train {

// One micro-batch as a data source makes it, on the CPU: the model's input and the loss's target
// (either may be undefined when a model needs one tensor only). The engine moves both to the
// training device.
struct Batch {
  Tensor input;
  Tensor target;
};

// Which part of the data a rank reads: data-parallel rank `rank` of `ranks` (the ranks of one
// pipeline or tensor group read the same batches).
struct DataShard {
  int64_t rank = 0;
  int64_t ranks = 1;
};

// A resumable stream of batches for one data rank.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next `rows` items (the micro-batch), the same sequence on every run from one position.
  virtual Batch next(int64_t rows) = 0;
  // Where the stream stands, saved in checkpoints and restored on resume.
  virtual nlohmann::json position() const = 0;
  virtual void set_position(const nlohmann::json& position) = 0;
  // One line for the run's header ("token file data/train.bin").
  virtual std::string describe() const { return "user data"; }
};

// A model that runs as pipeline stages (parallel.pipeline > 1), as GPT, BERT and ViT do: its
// stage plan and the forward of one of this rank's model chunks.
class StagedModel {
 public:
  virtual ~StagedModel() = default;
  virtual const nn::PipelineStage& stage() const = 0;
  // Local chunk `chunk`'s forward: on the first stage's first chunk from batch.input, elsewhere
  // from the previous stage's activation `input`; on the last stage's last chunk, the mean loss
  // against batch.target (a scalar), elsewhere the activation for the next stage.
  virtual Tensor stage_forward(int chunk, const Tensor& input, const Batch& batch) = 0;
  // Parameters two stages hold (a table tied to the head): their gradients are summed.
  virtual std::vector<std::string> tied_parameters() const { return {}; }
};

// A user's model for the engine: how to build it, score a batch and read its data.
struct ModelRecipe {
  std::string name = "custom";  // for the run's header
  // Builds the model from the configuration's model section (its keys but "type"), written as
  // serial code against models/nn. Weights are drawn on the CPU from ctx's generator, the same on
  // every rank; the engine moves the model to the training device. Required. Under
  // parallel.pipeline > 1 the module must implement StagedModel.
  std::function<std::shared_ptr<nn::Module>(const nn::BuildContext& ctx,
                                            const nlohmann::json& options)>
      build;
  // The mean loss of one micro-batch: a differentiable scalar (the serial code's
  // criterion(model(input), target)). Required unless the model is pipelined.
  std::function<Tensor(nn::Module& model, const Batch& batch)> loss;
  // This data rank's training batches (required) and held-out batches (optional: no evaluation).
  std::function<std::unique_ptr<BatchSource>(const DataShard& shard)> train_data;
  std::function<std::unique_ptr<BatchSource>(const DataShard& shard)> val_data;
  // What one item of a batch is worth in the throughput line: tokens per sequence, or 1.
  int64_t units_per_item = 1;
  std::string unit = "item";
};

// The bundled LM data as a BatchSource: the built-in grammar text or data.path's token file
// (data.format), windows of train.seq_len tokens with inputs and next-token targets, shuffled by
// data.shuffle and cut over the data ranks as GPT's. `held_out`: data.val_path's windows (or the
// built-in held-out text), null when there is none.
std::unique_ptr<BatchSource> lm_batches(const TrainConfig& config, const DataShard& shard,
                                        bool held_out = false);

// The Task that runs a recipe (what the engine trains; exposed for tests).
std::unique_ptr<Task> make_recipe_task(const ModelRecipe& recipe, const TaskContext& ctx);

class Engine {
 public:
  // Collective over `world` (null: one process without MPI), as run_training: builds the model of
  // config.kind (gpt, bert, vit), or with a recipe the user's (config model.type "custom"), its
  // optimizer, precision and layout, and resumes from the latest checkpoint under
  // checkpoint.dir. Errors as run_training's.
  Engine(const TrainConfig& config, std::shared_ptr<parallel::Communicator> world,
         const TrainerOptions& options = {});
  Engine(const TrainConfig& config, const ModelRecipe& recipe,
         std::shared_ptr<parallel::Communicator> world, const TrainerOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Trains to train.steps: evaluations every train.eval_every steps, checkpoints every
  // checkpoint.every steps, a final evaluation and checkpoint (run_training is this).
  TrainSummary fit();
  // One optimizer step (collective): returns the global batch's mean loss.
  double train_step();
  // An evaluation of train.eval_batches held-out micro-batches per rank (collective); empty
  // metrics without held-out data.
  EvalResult evaluate();
  // A checkpoint of this step under checkpoint.dir (collective; nothing without a dir).
  void save();
  // Optimizer steps done, counting those of the checkpoint it resumed from.
  int64_t step() const;
  // This rank's model: its shards and its stages' layers under a parallel layout.
  nn::Module& model();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::train
