// Checkpoints under pipeline parallelism. Each stage holds part of the serial model under the
// serial names, but its optimizer numbers only its own parameters ("state.<k>.<name>", k local).
// Saving renumbers a stage's optimizer state to the serial model's numbering and gathers every
// stage's pieces onto pipeline rank 0, which writes the serial checkpoint; loading takes the
// stage's tensors from the serial checkpoint and renumbers the state back. So a pp 4 checkpoint
// evaluates on one process and resumes under pp 2, and the reverse.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/shape.h"
#include "models/io/safetensors.h"
#include "optim/optimizer.h"
#include "parallel/comm/communicator.h"

namespace tessera::train {

// The optimizer's numbering of a parameter list: k counts through the decaying group, then the
// rest (optim::param_groups_with_decay's two groups).
struct ParamOrder {
  std::vector<std::string> names;  // by k
  size_t decaying = 0;             // group 0 is k < decaying, group 1 the rest

  static ParamOrder of(const std::vector<std::pair<std::string, Shape>>& params);
  // k of `name`, or -1.
  int64_t index(const std::string& name) const;
};

// The state of parameters numbered by `from` renumbered by `to`: entries of parameters `to` lacks
// are dropped, and param_groups list `to`'s parameters.
optim::OptimizerState renumber_state(const optim::OptimizerState& state, const ParamOrder& from,
                                     const ParamOrder& to);

// Collective over the pipeline group: every stage's model tensors and (serially numbered)
// optimizer state merged on group rank 0 (a tensor two stages hold, a tied embedding, once);
// the other ranks' arguments are left as they were.
void gather_stages(parallel::Communicator& group, io::NamedTensors& model,
                   optim::OptimizerState& state);

}  // namespace tessera::train
