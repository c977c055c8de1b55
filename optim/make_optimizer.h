// Builds an optimizer from its JSON configuration (the "optimizer" section of a training config):
// {"type": "adamw", "lr": 6e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "optim/optimizer.h"

namespace tessera::optim {

// type is one of sgd, adam, adamw, lamb, lars; the other keys are that optimizer's options (see its
// header) and default as there. Unknown types and keys throw naming them. Each group's lr and
// weight_decay, when set, override the configured values.
std::unique_ptr<Optimizer> make_optimizer(const nlohmann::json& config, const std::vector<ParamGroup>& groups);

}  // namespace tessera::optim
