// Moving whole tensors between their serial form and this rank's shard by Placement: the
// checkpoint writer gathers shards under serial names, the loader and resharding cut them again.
// Not differentiable (data movement for checkpoints and tests, outside autograd).
#pragma once

#include "core/tensor.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement.h"

namespace tessera::parallel::tensor {

// The serial tensor (placement.global_shape) from every rank's shard: all-gathers along each split
// over its group (collective over those groups), drops the padding. A replicated placement returns
// `shard` itself. Contiguous, on shard's device.
Tensor gather_full(const Tensor& shard, const Placement& placement, const ParallelContext& context);

// This rank's shard (placement.local_shape()) cut from the serial tensor `full`; padding zeros.
// No communication. A replicated placement returns `full`.
Tensor cut_shard(const Tensor& full, const Placement& placement);

}  // namespace tessera::parallel::tensor
