// Checkpoints under tensor parallelism hold the serial model: every tensor under its serial name
// and global shape, so a checkpoint written under one layout resumes under another (or serially,
// or in `tessera eval`). Saving gathers each shard by its placement (collective over the tensor
// groups); loading cuts this rank's shard from the full tensor.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/io/pieces.h"
#include "models/io/safetensors.h"
#include "models/train/pipeline_state.h"
#include "models/nn/module.h"
#include "optim/mixed_precision.h"
#include "optim/optimizer.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement.h"

namespace tessera::train {

using Placements = std::map<std::string, parallel::tensor::Placement>;

// The placement of each of model.state_dict()'s names.
Placements model_state_placements(const nn::Module& model);

// The placement of optimizer state tensor "state.<k>.<name>" is parameter k's (k counts through
// optimizer.params(), the f32 masters of `masters`), for tensors of that parameter's shape (local
// or global); other state (scalars) is replicated.
parallel::tensor::Placement optimizer_state_placement(const std::string& name, const Tensor& t,
                                                      const optim::Optimizer& optimizer,
                                                      const optim::MasterWeights& masters,
                                                      const Placements& model_placements,
                                                      const nn::Module& model);

// Every tensor gathered into its serial form (collective over the groups of the placements).
io::NamedTensors gather_named(const io::NamedTensors& shards, const Placements& placements,
                              const parallel::ParallelContext& context);
// Every serial tensor cut to this rank's shard.
io::NamedTensors cut_named(const io::NamedTensors& full, const Placements& placements);

// Sharded checkpoints (models/io/piece_checkpoint.h): every rank writes the pieces it owns and
// reads the pieces it needs, all in serial terms (serial names, global shapes, placement boxes).

// One tensor of this rank's checkpoint state, as the update engine holds it.
struct StatePiece {
  std::string name;   // a model state_dict name, or optimizer_tensor_name(...)
  std::string param;  // the model state name whose placement it follows (== name for the model's)
  Tensor data;        // the whole local tensor, or a flat range of it
  int64_t flat_begin = -1;      // >= 0: data is the local tensor's flat elements from here on
  bool data_replicated = true;  // the same on every data-parallel replica (false: a ZeRO shard)
};

// "optim/<state>/<parameter>" ("optim/exp_avg/h.0.attn.c_attn.weight"): optimizer state keyed by
// its parameter's serial name, never by position, so any layout finds its own.
std::string optimizer_tensor_name(const std::string& state, const std::string& param);
// The inverse: false unless `name` is one.
bool parse_optimizer_tensor_name(const std::string& name, std::string& state, std::string& param);

// The box of a rank's local tensor under placement p, or of its flat elements
// [flat_begin, flat_begin + numel) when flat_begin >= 0.
io::PieceBox local_box(const parallel::tensor::Placement& p, int64_t flat_begin = -1,
                       int64_t numel = 0);

// Optimizer meta between the optimizer's numbering ({"type", "param_groups": [{..., "params":
// [k]}], "state": {"k": entry}}, k counting through `order`) and the layout-independent one keyed
// by names ({"type", "param_groups": [{..., "params": [names]}], "state": {name: entry}}).
nlohmann::json named_optimizer_meta(const nlohmann::json& meta, const ParamOrder& order);
// Names back to `order`'s numbering: its parameters the stored groups list (any other layout's),
// state entries of parameters `order` lacks dropped. Throws naming a parameter no group lists.
nlohmann::json indexed_optimizer_meta(const nlohmann::json& named, const ParamOrder& order);
// Every rank's named meta merged (each holds its stage's parameters): groups' names united.
nlohmann::json merge_named_meta(const std::vector<nlohmann::json>& metas);

}  // namespace tessera::train
