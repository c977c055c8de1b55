// Checkpoints under tensor parallelism hold the serial model: every tensor under its serial name
// and global shape, so a checkpoint written under one layout resumes under another (or serially,
// or in `tessera eval`). Saving gathers each shard by its placement (collective over the tensor
// groups); loading cuts this rank's shard from the full tensor.
#pragma once

#include <map>
#include <string>

#include "models/io/safetensors.h"
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

}  // namespace tessera::train
