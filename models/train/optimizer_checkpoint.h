// The optimizer's part of a checkpoint, apart from the step (update_engine.h): the model's tensors
// with their f32 master values, the plain optimizer's state and a sharded checkpoint's pieces, for
// the plain path (every parameter's master, one optimizer) and ZeRO (masters and state sharded over
// the data group). Both save the same format, so either resumes the other's checkpoints; for a
// sharded checkpoint each hands over the pieces it holds (ZeRO: its flat ranges) and ZeRO reads
// back only its own ranges.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/io/checkpoint.h"
#include "models/nn/module.h"
#include "models/train/pipeline_state.h"
#include "models/train/sharded_state.h"
#include "optim/mixed_precision.h"
#include "optim/optimizer.h"
#include "parallel/zero/sharded_optimizer.h"

namespace tessera::train {

class OptimizerCheckpoint {
 public:
  virtual ~OptimizerCheckpoint() = default;

  // Collective under ZeRO. The model's tensors with f32 master values (model_checkpoint_tensors);
  // loading them into the model and the f32 values.
  virtual io::NamedTensors model_tensors(const nn::Module& model) = 0;
  virtual void load_model(nn::Module& model, const io::NamedTensors& tensors,
                          const std::string& dir) = 0;
  // The plain optimizer's state ("state.<k>.<name>", optim/state_key.h, k counting the groups'
  // parameters) with this rank's parameter shapes.
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
};

// The optimizer's numbering of the model's parameters (both adapters number them this way).
ParamOrder optimizer_order(const nn::Module& model);

// The plain path's adapter over every parameter's master and the optimizer stepping them (both
// must outlive it).
std::unique_ptr<OptimizerCheckpoint> make_plain_checkpoint(optim::MasterWeights& masters,
                                                           optim::Optimizer& optimizer);
// ZeRO's adapter over its sharded optimizer (which must outlive it).
std::unique_ptr<OptimizerCheckpoint> make_zero_checkpoint(parallel::zero::ShardedOptimizer& zero);

}  // namespace tessera::train
