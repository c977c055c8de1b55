// DeepSpeed-Ulysses' pair of differentiable all-to-alls over a sequence group: from sequence
// shards with every head to every position with a shard of the heads, and back. Each is the
// other's backward; their nodes always run on every rank (as parallel/tensor's region ops). A null
// group or a group of one is the identity.
#pragma once

#include <memory>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"

namespace tessera::parallel::sequence {

// x (B, H, C, D), this rank's C positions of every head -> (B, H / S, S C, D), heads
// [rank H / S, (rank + 1) H / S) at every rank's positions, in rank order (the laid-out sequence,
// layout.h). H must be divisible by S.
Tensor sequence_to_heads(const Tensor& x, const std::shared_ptr<Communicator>& group);
// The inverse: x (B, H / S, S C, D) -> (B, H, C, D).
Tensor heads_to_sequence(const Tensor& x, const std::shared_ptr<Communicator>& group);

}  // namespace tessera::parallel::sequence
