// What the trainer does between the last backward of a step and the next forward, and the
// optimizer's part of a checkpoint, behind one interface with two implementations: the plain path
// (DataParallel's all-reduce, an f32 master of every parameter, one optimizer over them) and ZeRO
// stages 1-3 (parallel/zero: masters and optimizer state sharded over the data group; stage 2 also
// gradients, stage 3 also parameters). Both save the same checkpoint format, so either resumes the
// other's checkpoints; for a sharded checkpoint each hands over the pieces it holds (ZeRO: its flat
// ranges) and ZeRO reads back only its own ranges.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/io/checkpoint.h"
#include "models/nn/module.h"
#include "models/train/sharded_state.h"
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

  // Checkpoint pieces, collective under ZeRO. The model's tensors with f32 master values
  // (model_checkpoint_tensors); loading them into the model and the f32 values.
  virtual io::NamedTensors model_tensors(const nn::Module& model) = 0;
  virtual void load_model(nn::Module& model, const io::NamedTensors& tensors,
                          const std::string& dir) = 0;
  // The plain optimizer's state ("state.<k>.<name>", k counting the groups' parameters) with
  // this rank's parameter shapes.
  virtual optim::OptimizerState state_dict() = 0;
  virtual void load_state_dict(const optim::OptimizerState& state) = 0;
  // Under tensor parallelism: where optimizer state tensor `name` lives (its parameter's
  // placement).
  virtual parallel::tensor::Placement state_placement(const std::string& name, const Tensor& t,
                                                      const Placements& model_placements,
                                                      const nn::Module& model) const = 0;
  // A sharded checkpoint's part of this rank, without communication: the model's tensors (f32
  // master values) and the optimizer's state under optimizer_tensor_name(), each the whole local
  // tensor (the plain path) or this rank's flat range of it (ZeRO's shards).
  virtual std::vector<StatePiece> checkpoint_pieces(const nn::Module& model) = 0;
  // The optimizer state's meta keyed by parameter name (named_optimizer_meta), no communication.
  virtual nlohmann::json named_meta(const nn::Module& model) = 0;
  // Reads part of a sharded checkpoint's tensor `name`: the flat elements [offset, offset + numel)
  // of the local tensor of `param`'s placement, or (numel < 0) that whole local tensor.
  using PieceSource = std::function<Tensor(const std::string& name, const std::string& param,
                                           int64_t offset, int64_t numel)>;
  // A sharded resume that reads only this rank's own pieces (ZeRO: its flat ranges of each
  // parameter, not the whole parameters). meta: optimizer meta in this model's numbering; states:
  // each parameter's stored optimizer state names. Collective under ZeRO. False when the engine
  // keeps whole tensors anyway (the plain path): the caller reads them and calls load_model and
  // load_state_dict.
  virtual bool load_own_pieces(nn::Module& model, const nlohmann::json& meta,
                               const std::map<std::string, std::vector<std::string>>& states,
                               const PieceSource& read) {
    (void)model, (void)meta, (void)states, (void)read;
    return false;
  }
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
