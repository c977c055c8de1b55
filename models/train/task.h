// What differs between the GPT, BERT and ViT trainers: the model, its data and loss, its
// evaluation metrics and what happens at the end. The Trainer (trainer.h) owns everything else.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "core/generator.h"
#include "core/tensor.h"
#include "models/nn/module.h"
#include "models/nn/pipeline_stage.h"
#include "models/train/train_config.h"
#include "parallel/comm/communicator.h"
#include "parallel/comm/rank_sum.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/pipeline/executor.h"

namespace tessera::train {

struct TaskContext {
  const TrainConfig* config = nullptr;
  int64_t data_rank = 0;  // this rank's place among the data-parallel ranks
  int64_t data_size = 1;
  Generator* init_gen = nullptr;  // draws the initial weights (the same on every rank)
  Device device = kCPU;           // where the model and every batch live
  // The job's layout: layers split where its tensor, pipeline or sequence size is above 1;
  // null (one process): serial.
  const parallel::ParallelContext* parallel = nullptr;
};

// Named metrics of one evaluation ({"val_loss": 1.2, "val_ppl": 3.3}) and a one-line summary.
struct EvalResult {
  nlohmann::json metrics = nlohmann::json::object();
  std::string summary;
};

class Task {
 public:
  virtual ~Task() = default;

  virtual nn::Module& model() = 0;
  // Draws this rank's next micro-batch (micro_batch rows) and returns its mean loss: a
  // differentiable scalar on the model's device.
  virtual Tensor micro_loss(int64_t micro_batch) = 0;
  // Tokens per sequence (GPT, BERT) or 1 (an image), and the unit's name ("tok", "img").
  virtual int64_t units_per_item() const = 0;
  virtual const char* unit() const = 0;
  // One line saying what the data is (and, for built-in data, the best achievable result).
  virtual std::string data_description() const = 0;

  // The data stream's position, for checkpoints.
  virtual nlohmann::json data_state() const = 0;
  virtual void load_data_state(const nlohmann::json& state) = 0;

  // Collective over data_group: evaluates `batches` micro-batches per rank of the held-out data
  // (the same ones every time) in eval mode without gradients. An empty result means no
  // held-out data.
  virtual EvalResult evaluate(parallel::Communicator* data_group, int64_t batches,
                              int64_t micro_batch) = 0;
  // After training: GPT prints a sample. Every rank of a tensor-parallel model calls it (the
  // sample's forward passes are collective); the others pass a sink that is thrown away.
  virtual void finish(std::ostream& out) {}

  // Pipeline parallelism (parallel.pipeline > 1): the model's stage plan (null: this task's
  // model is not pipelined).
  virtual const nn::PipelineStage* pipeline_stage() const { return nullptr; }
  // Draws this step's `count` micro-batches of `micro_batch` rows. Every stage draws the same
  // ones: the first stage feeds their inputs, the last scores their targets.
  virtual void draw_micro_batches(int64_t count, int64_t micro_batch);
  // Local chunk `chunk`'s forward on drawn micro-batch m (input: the previous stage's activation,
  // undefined on stage 0); on the last stage the micro-batch's mean loss.
  virtual Tensor stage_forward(int chunk, int64_t m, const Tensor& input);
  // Parameters two stages hold (GPT's wte, tied to the head): their gradients are summed.
  virtual std::vector<std::string> tied_parameters() const { return {}; }
  // The executor evaluate() and finish() run their forward passes through (set by the trainer).
  void set_pipeline(parallel::pipeline::PipelineExecutor* executor) { pipeline_ = executor; }

 protected:
  parallel::pipeline::PipelineExecutor* pipeline_ = nullptr;
};

// Builds the task of config.kind: the model (f32, weights drawn on the CPU from ctx.init_gen, so
// every device starts from the same values, then moved to ctx.device) and its data (batches are
// made on the CPU and moved to ctx.device; metrics come back to the host).
// Throws ValueError for data the model cannot read (a missing file, a vocabulary larger than
// the model's).
std::unique_ptr<Task> make_gpt_task(const TaskContext& ctx);
std::unique_ptr<Task> make_bert_task(const TaskContext& ctx);
std::unique_ptr<Task> make_vit_task(const TaskContext& ctx);
std::unique_ptr<Task> make_task(const TaskContext& ctx);

// Sums each value over the ranks of `comm` (nullptr: one rank), exactly and in rank order, so
// every rank gets bit-identical results (parallel/comm/rank_sum.h).
using parallel::sum_over_ranks;

}  // namespace tessera::train
