// The one place that chooses ZeRO's parts from its options: how gradients reach the shards
// (grad_reduction.h), how the shards are updated (shard_update.h) and how the parameters follow
// them (param_sync.h). ShardedOptimizer composes what this returns.
//
//   stage  reduction          update                          parameter sync
//   1      all-reduce         plain                           all-gather
//   2      reduce to owner    plain, or overlapped (offload)  all-gather
//   3      reduce to owner    plain, or overlapped (offload)  gather on use (Stage3Params)
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "optim/optimizer.h"
#include "parallel/zero/grad_reduction.h"
#include "parallel/zero/param_sync.h"
#include "parallel/zero/shard_update.h"
#include "parallel/zero/stage3_params.h"
#include "parallel/zero/zero_layout.h"

namespace tessera::parallel::zero {

struct ZeroPartsOptions {
  int stage = 1;  // 1, 2 or 3 (checked by the caller)
  int64_t bucket_cap_bytes = 25 * 1024 * 1024;
  bool broadcast_parameters = true;
  bool overlap_step = false;  // allowed only where overlap_step_allowed() says
  Stage3Options stage3;
  // Stage 3 after a sharded build: this rank's f32 master shards (one per group, checked here);
  // empty: taken from the parameters.
  std::vector<Tensor> sharded_masters;
};

// Declared in this order so that the update (whose overlapped form hooks into the reduction) goes
// before the reduction.
struct ZeroParts {
  std::unique_ptr<GradReduction> reduction;
  std::unique_ptr<ShardUpdate> update;
  std::unique_ptr<ParamSync> sync;
};

// Collective over the layout's group (stage 1's DataParallel and stages 2-3 broadcast rank 0's
// parameters unless told not to or built sharded).
ZeroParts make_zero_parts(std::shared_ptr<const ZeroLayout> layout,
                          const std::vector<optim::ParamGroup>& groups,
                          const nlohmann::json& optimizer, const ZeroPartsOptions& options);

}  // namespace tessera::parallel::zero
