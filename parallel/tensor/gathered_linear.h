// Megatron's sequence-parallel input to a column-parallel linear as one autograd op: the all-gather
// of each rank's sequence shard fused with the linear that consumes it. Forward is
// linear(all_gather_to_region(x, dim, group), weight, bias); the gathered input is transient and
// only the shard is kept for backward, which gathers it again for the weight gradient and
// reduce-scatters the input gradient. So the saved activation is 1/P of the gathered one, for one
// more all-gather in backward. The backward node always runs on every rank (Node::always_run).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "parallel/tensor/region_ops.h"

namespace tessera::parallel::tensor {

// x: this rank's chunk along `dim` (e.g. (B, T/P, in)); weight (out, in); bias (out) or undefined
// -> (B, T, out). A null communicator or a group of one is linear(x, weight, bias). Inputs of
// mixed dtypes take the unfused path (all_gather_to_region, then linear).
Tensor gathered_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t dim,
                       const CommPtr& group);

}  // namespace tessera::parallel::tensor
