// What `bench zero`'s measurements share: the maximum over the ranks, and the update engine's
// spec for a GPT under ZeRO (AdamW, the trainer's decay groups, the data group = the world).
#pragma once

#include <memory>

#include "core/factory.h"
#include "models/nn/module.h"
#include "models/train/update_engine.h"
#include "optim/optimizer.h"
#include "parallel/comm/communicator.h"

namespace tessera::bench {

// The maximum over the group: a step is as slow as its slowest rank, and the busiest rank bounds
// what a layout needs.
inline double max_over(parallel::Communicator& group, double v) {
  Tensor t = from_vector<double>({v}, {1});
  group.all_reduce(t, parallel::ReduceOp::max)->wait();
  return t.item();
}

// ZeRO `stage` over `world` for `model`, with AdamW (lr 1e-4, weight decay 0.1); the caller sets
// offload, placement and bucket sizes.
// The parameter groups of zero_adamw_spec: weight decay 0.1 except biases and norms.
inline std::vector<optim::ParamGroup> zero_adamw_groups(const nn::Module& model) {
  return optim::param_groups_with_decay(model.named_parameters(), 0.1);
}

inline train::UpdateEngineSpec zero_adamw_spec(nn::Module& model,
                                               const std::shared_ptr<parallel::Communicator>& world,
                                               int stage) {
  train::UpdateEngineSpec spec;
  spec.model = &model;
  spec.groups = zero_adamw_groups(model);
  spec.optimizer = {{"type", "adamw"}, {"lr", 1e-4}, {"weight_decay", 0.1}};
  spec.grad_group = world;
  spec.zero_stage = stage;
  return spec;
}

}  // namespace tessera::bench
