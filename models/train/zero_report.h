// What ZeRO says about itself in the run's header: the stage, the share of masters and optimizer
// state each rank keeps, offload, a sharded build and stage 3's chunk placement; and, once after
// the first step, where the auto placement put the chunks.
#pragma once

#include <string>

#include "parallel/zero/sharded_optimizer.h"

namespace tessera::train {

// A line (or lines) for the header; built_sharded: its masters came from a sharded build.
std::string describe_zero(const parallel::zero::ShardedOptimizer& zero, bool built_sharded);
// "" unless stage 3 places its chunks automatically.
std::string zero_placement_report(const parallel::zero::ShardedOptimizer& zero);

}  // namespace tessera::train
